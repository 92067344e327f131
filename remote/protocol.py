"""The JSON-lines wire format between the controller and the agent (see PROTOCOL.md).

Kept tiny and total: ``decode_line`` never raises, whatever bytes arrive, because a
corrupt line must become a reported protocol error, never a dead agent or controller.
"""

import json

PROTOCOL_VERSION = 1
AGENT_VERSION = "0.1.0"
MAX_LINE_BYTES = 1 << 20  # one request or event; log tails are capped well below this


class ProtocolError(ValueError):
    """A line that is not a protocol message; ``str()`` says why, quoting the line."""


def encode(message):
    """One message as one line of compact JSON (no embedded newlines, ASCII only).

    NaN and infinities (which a job's progress line may carry in extra keys) become ``null``:
    strict JSON readers reject them, and a sender must never fail on what a job printed.
    """
    try:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(message), separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return (text + "\n").encode("ascii")


def _finite(value):
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _shorten(text, limit=120):
    return text if len(text) <= limit else text[:limit] + "..."


def decode_line(raw):
    """Parse one line into a message dict.

    Returns ``(message, None)`` on success or ``(None, reason)`` where ``reason`` quotes the
    offending line; never raises. A message is a JSON object with either an ``op`` (request),
    an ``event`` or an ``id`` with ``ok`` (reply).
    """
    try:
        if isinstance(raw, (bytes, bytearray)):
            if len(raw) > MAX_LINE_BYTES:
                return None, "line too long (%d bytes)" % len(raw)
            text = bytes(raw).decode("utf-8", errors="replace")
        elif isinstance(raw, str):
            text = raw
        else:
            return None, f"not a line: {type(raw).__name__!r}"
        text = text.strip()
        if not text:
            return None, "empty line"
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            return None, f"not JSON: {_shorten(text)!r}"
        if not isinstance(message, dict):
            return None, f"not a JSON object: {_shorten(text)!r}"
        kind = _kind(message)
        if kind is None:
            return None, f"not a protocol message (no op, event or reply id): {_shorten(text)!r}"
        return message, None
    except Exception as exc:  # a parser must be total; report rather than propagate
        return None, f"unparseable line ({type(exc).__name__})"


def _kind(message):
    if isinstance(message.get("op"), str):
        return "request"
    if isinstance(message.get("event"), str):
        return "event"
    if isinstance(message.get("id"), int) and not isinstance(message.get("id"), bool) and isinstance(
        message.get("ok"), bool
    ):
        return "reply"
    return None


def message_kind(message):
    """``"request"``, ``"event"`` or ``"reply"`` for a decoded message."""
    return _kind(message)


def reply(request_id, result=None):
    return {"id": request_id, "ok": True, "result": result if result is not None else {}}


def error_reply(request_id, error):
    return {"id": request_id, "ok": False, "error": str(error)}


def event(name, **fields):
    message = {"event": name}
    message.update(fields)
    return message
