"""What the Hosts screen's forms write and compare, as plain functions of a host's fields."""

from __future__ import annotations

from typing import Any


def changed_keys(fields: dict[str, Any]) -> list[str]:
    """``key`` or ``table.key`` for each value the form writes."""
    return [f"{k}.{sub}" for k, v in fields.items() if isinstance(v, dict) for sub in v] + [
        k for k, v in fields.items() if not isinstance(v, dict)]


def value_at(raw: dict[str, Any], dotted: str) -> Any:
    key, _, sub = dotted.partition(".")
    value = raw.get(key)
    return value.get(sub) if sub and isinstance(value, dict) else value


def as_text(value: Any) -> str:
    """A file's value as the form shows it: a list read "['inference', 'gpu-t4']" (Python's repr)."""
    if value is None:
        return "unset"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "empty"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {v}" for k, v in value.items())
    return str(value)


def unused_by_local(fields: dict[str, Any], changed: dict[str, Any] | None = None) -> str:
    """A local host's address, port, user or jump, as the form gives them: saved, then never
    used (a host named "spare" with Address "spare-gpu" ran its jobs on this machine), as
    ``hosts add --transport local --address`` refuses them."""
    if (fields.get("transport") or "ssh") != "local":
        return ""
    keys = [k for k in ("address", "port", "user", "jump") if fields.get(k) not in (None, "")
            and (changed is None or k in changed or "transport" in changed)]
    if not keys:
        return ""
    return (f"{keys[0]}: a local host runs on this machine, without SSH, and would not use "
            f"{' or '.join(keys)}: choose ssh to reach {fields.get('address') or fields.get('name')}, or clear "
            f"{' and '.join(keys)}")
