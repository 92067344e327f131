"""Parse the ``@heet-progress {...}`` lines that training scripts print (docs/TRAINING.md).

Both the agent (forwarding progress events) and the controller use this; it never raises,
because it reads arbitrary user output.
"""

import json
import math
import re

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
    return read_progress_line(line)[0]


def progress_problem(line):
    """Why a line that carries the prefix is not a progress line (None when it is one, or has no prefix).

    Such lines were dropped without a word: a script printing ``str()`` of a dict (single
    quotes, not JSON) or leaving out ``samples_per_s`` was never measured, and its author was
    told only that it printed no progress lines.
    """
    return read_progress_line(line)[1]


MAX_PROGRESS_BYTES = 4096  # as sent (non-ASCII escaped): a heartbeat carries the latest of up to 100 runs
MAX_SAMPLES_PER_S = 1e9  # samples a second: a thousand times the fastest real training


def read_progress_line(line):
    """``(progress, None)``, ``(None, why it is not one)``, or ``(None, None)`` without the prefix."""
    try:
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if not isinstance(line, str):
            return None, None
        start = line.find(PREFIX.strip())
        if start < 0:
            return None, None
        body = line[start + len(PREFIX.strip()):].strip()
        try:
            data = json.loads(body)
        except ValueError:
            quoted = body.startswith("{") and "'" in body
            return None, "not JSON" + (" (single quotes: print json.dumps(d), not the dict itself)" if quoted else "")
        return check_progress(data)
    except Exception as exc:  # it reads arbitrary user output: never raise
        return None, "unreadable ({})".format(type(exc).__name__)


MAX_COUNT = 10 ** 15  # steps or samples: far beyond any real job, and below what a store's integers hold


def check_progress(data):
    """``(progress, None)`` for a valid progress dict, else ``(None, why)``: the agent checks each
    line with it, and the controller each report an agent forwards (a corrupted agent's NaN
    speed stopped every planning round)."""
    try:
        if not isinstance(data, dict):
            return None, "not a JSON object"
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            return None, "missing " + ", ".join(missing)
        out = dict(data)
        for key in _NUMERIC:
            if key not in data or data[key] is None and key not in REQUIRED:
                continue
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None, "{} is not a finite number".format(key)
            out[key] = int(value) if key in ("step", "samples") else float(value)
        if out["step"] > MAX_COUNT or out["samples"] > MAX_COUNT:  # a store's integers overflowed
            return None, "step or samples beyond any real job (at most %d)" % MAX_COUNT
        if out["step"] < 0 or out["samples"] < 0 or out["samples_per_s"] < 0:
            return None, "step, samples and samples_per_s must not be negative"
        if out["samples_per_s"] > MAX_SAMPLES_PER_S:  # 1e15 became a measurement, and every job's guesses
            return None, "samples_per_s %g is beyond any real job (at most %g)" % (out["samples_per_s"],
                                                                                   MAX_SAMPLES_PER_S)
        checkpoint = data.get("checkpoint")
        if checkpoint is not None and not isinstance(checkpoint, str):
            return None, "checkpoint is not a string"
        if len(json.dumps(out)) > MAX_PROGRESS_BYTES:
            # the agent forwards it in events and every heartbeat: one 400 KB line of metrics cut
            # the host's link again and again (over the protocol's line limit once escaped)
            return None, "longer than %d bytes as JSON: report fewer or shorter metrics" % MAX_PROGRESS_BYTES
        return out, None
    except Exception as exc:  # arbitrary input: never raise
        return None, "unreadable ({})".format(type(exc).__name__)


MAX_PROBLEM_KINDS = 5  # kinds of bad progress lines said per job (by its agent, and by the controller)


def problem_kind(problem):
    """A problem with its figures left out: "step went back from 9 to 5" and "... from 30 to 2"
    are one kind, said once."""
    return re.sub(r"\d[\d.e+-]*", "#", problem)
