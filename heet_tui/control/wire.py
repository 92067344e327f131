"""JSON forms of snapshots, intents and predictions for a TUI attached to a running controller.

Built from the dataclasses' own type hints, so a field added to a snapshot travels without a
second place to update. Decoding checks every value against its declared type and raises
:class:`WireError` naming the path to the bad value: what comes over the socket is input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from heet_tui.core import intents as intent_types
from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import Snapshot

INTENTS: dict[str, type] = {
    name: cls for name, cls in vars(intent_types).items()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == intent_types.__name__
}


class WireError(ValueError):
    """A message that does not decode into what it claims to be."""


def to_obj(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_obj(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_obj(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_obj(v) for k, v in value.items()}
    return value


def from_obj(tp: Any, obj: Any, path: str = "$") -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return obj
    if origin in (typing.Union, types.UnionType):
        if obj is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for option in options[:-1]:
            with contextlib.suppress(WireError):
                return from_obj(option, obj, path)
        return from_obj(options[-1], obj, path)  # its error says what is wrong
    if origin is tuple:
        if not isinstance(obj, list):
            raise WireError(f"{path}: expected a list, got {type(obj).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_obj(args[0], v, f"{path}[{i}]") for i, v in enumerate(obj))
        if len(args) != len(obj):
            raise WireError(f"{path}: expected {len(args)} items, got {len(obj)}")
        return tuple(from_obj(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, obj, strict=True)))
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        if not isinstance(obj, dict):
            raise WireError(f"{path}: expected an object, got {type(obj).__name__}")
        value_type = args[1] if args else Any
        return {str(k): from_obj(value_type, v, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(obj)
        except ValueError:
            raise WireError(f"{path}: {_show(obj)} is not a {tp.__name__}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp, obj, path)
    if tp is float:
        if isinstance(obj, int | float) and not isinstance(obj, bool):
            return float(obj)
        raise WireError(f"{path}: expected a number, got {_show(obj)}")
    if tp in (int, str, bool):
        if type(obj) is tp:
            return obj
        raise WireError(f"{path}: expected {tp.__name__}, got {_show(obj)}")
    raise WireError(f"{path}: cannot decode type {tp}")


def _show(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


@functools.cache
def _shape(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field, ...]]:
    """A dataclass's field types, read once: read for each object decoded (213 us a JobStatus),
    an attached TUI spent 0.2-0.4 s of CPU on each snapshot of a store with a long history."""
    return typing.get_type_hints(cls), dataclasses.fields(cls)


def _dataclass(cls: type, obj: Any, path: str) -> Any:
    if not isinstance(obj, dict):
        raise WireError(f"{path}: expected an object for {cls.__name__}, got {type(obj).__name__}")
    hints, fields = _shape(cls)
    values = {}
    for f in fields:
        if f.name in obj:
            values[f.name] = from_obj(hints[f.name], obj[f.name], f"{path}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise WireError(f"{path}: {cls.__name__} lacks {f.name!r}")
    return cls(**values)


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"not a JSON line: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise WireError(f"not a message (an object with an op): {line[:80]!r}")
    return message


def intent_to_obj(intent: Intent) -> dict[str, Any]:
    return {"type": type(intent).__name__, "fields": to_obj(intent)}


def intent_from_obj(obj: Any) -> Intent:
    if not isinstance(obj, dict) or obj.get("type") not in INTENTS:
        raise WireError(f"not an intent: {str(obj)[:80]}")
    return from_obj(INTENTS[obj["type"]], obj.get("fields"), f"$.{obj['type']}")


def snapshot_from_obj(obj: Any) -> Snapshot:
    return from_obj(Snapshot, obj)


def effect_from_obj(obj: Any) -> PredictedEffect:
    return from_obj(PredictedEffect, obj)


def edit_from_obj(obj: Any) -> EditJob:
    intent = intent_from_obj(obj)
    if not isinstance(intent, EditJob):
        raise WireError(f"a preview needs an EditJob, got {type(intent).__name__}")
    return intent
