"""Parse the ``@heet-progress {...}`` lines that training scripts print (docs/TRAINING.md).

Both the agent (forwarding progress events) and the controller use this; it never raises,
because it reads arbitrary user output.
"""

import json
import math

PREFIX = "@heet-progress "
REQUIRED = ("step", "samples", "samples_per_s")
_NUMERIC = ("step", "samples", "samples_per_s", "loss", "epoch")


def parse_progress_line(line):
    """The progress dict in ``line``, or ``None`` when the line is not a valid progress line.

    The prefix may come anywhere in the line: a progress bar on stderr (tqdm) leaves its last
    ``\r``-update in front of the next line printed, and logging adds ``INFO:root:``. Requiring
    the prefix first lost every progress line of such scripts.

    ``step`` and ``samples`` become ints, other numbers floats; ``checkpoint`` is a string or
    ``None``; unknown keys are kept as they are so scripts can report extra values.
    """
    try:
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if not isinstance(line, str):
            return None
        start = line.find(PREFIX.strip())
        if start < 0:
            return None
        body = line[start + len(PREFIX.strip()):].strip()
        data = json.loads(body)
        if not isinstance(data, dict) or any(k not in data for k in REQUIRED):
            return None
        out = dict(data)
        for key in _NUMERIC:
            if key not in data or data[key] is None and key not in REQUIRED:
                continue
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None
            out[key] = int(value) if key in ("step", "samples") else float(value)
        if out["step"] < 0 or out["samples"] < 0 or out["samples_per_s"] < 0:
            return None
        checkpoint = data.get("checkpoint")
        if checkpoint is not None and not isinstance(checkpoint, str):
            return None
        return out
    except Exception:
        return None
