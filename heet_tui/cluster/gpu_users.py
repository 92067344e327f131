"""The processes an agent saw on a GPU that heet did not start, as the UI and the plans see them.

The agent (``remote/gpu_users.py``) lists them per GPU from NVML or nvidia-smi; an agent's
message is untrusted input, so a malformed entry is dropped, never raised.
"""

from __future__ import annotations

from typing import Any

MAX_SHOWN = 8


def other_processes(raw: dict[str, Any]) -> tuple[str, ...]:
    """``("pid 4242 python (alice)", ...)`` from one GPU's ``others`` (and ``others_more``)."""
    found = raw.get("others")
    if not isinstance(found, list):
        return ()
    out = []
    for entry in found[:MAX_SHOWN]:
        if not isinstance(entry, dict) or not isinstance(entry.get("pid"), int) or isinstance(entry["pid"], bool):
            continue
        name, user, job = entry.get("name"), entry.get("user"), entry.get("heet_job")
        text = f"pid {entry['pid']}" + (f" {str(name)[:40]}" if name else "") + (f" ({str(user)[:32]})" if user else "")
        if isinstance(job, str) and job:  # another state store's heet job, by its agent's name for it
            text += f", heet job {job[:96]} of another state store"
        out.append(text)
    more = raw.get("others_more")
    if out and isinstance(more, int) and not isinstance(more, bool) and more > 0:
        out.append(f"and {more} more")
    return tuple(out)


def gpus_used_by_others(statuses) -> dict[str, set[int]]:
    """host -> GPUs where processes heet did not start compute: no plan gives them out."""
    return {s.name: used for s in statuses if (used := {g.index for g in s.gpus if g.others})}


def users_of(status, gpus: set[int]) -> str:
    """``"gpu1: pid 4242 python (alice)"`` for those of ``gpus`` that others use; "" for none."""
    return "; ".join(f"gpu{g.index}: {', '.join(g.others)}" for g in status.gpus if g.index in gpus and g.others)
