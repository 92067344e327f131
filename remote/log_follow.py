"""Following a job's log: its latest progress line sent to the controller, the log rotated once
read to its end (job_logs.py).

Read from where the last poll stopped, up to ``READ_BUDGET`` a poll: one 256 KiB chunk a poll kept
up with 1 MB/s, so a chattier job's progress fell minutes behind, it could be stopped as hung, and
its log, never read to its end, was never rotated.
"""

import os
import time

from heet_agent.job_logs import ROTATE_BYTES, as_shown, rotate, rotated_path
from heet_agent.progress import MAX_PROBLEM_KINDS, problem_kind, read_progress_line

READ_CHUNK = 1024 * 1024
READ_BUDGET = 32 * READ_CHUNK  # per job and poll (4 a second): a job may print 128 MB/s and be followed
MAX_BAD_LINE = 300  # characters of a misformed progress line sent back to the controller


def follow_log(job, send_event):
    """Read what the job wrote since the last poll (up to ``READ_BUDGET``); send its latest progress once."""
    latest, budget = None, READ_BUDGET
    try:
        with open(job["log"], "rb") as fh:
            if fh.seek(0, os.SEEK_END) < job.get("offset", 0):
                job["offset"] = 0  # truncated (rotated here, or by the user): read from the top
            while budget > 0:
                fh.seek(job.get("offset", 0))
                data = fh.read(READ_CHUNK)
                budget -= READ_CHUNK
                caught_up = len(data) < READ_CHUNK
                if caught_up and job.get("offset", 0) + len(data) > job.get("log_max", ROTATE_BYTES) \
                        and time.time() >= job.get("rotate_after", 0):
                    start = job.get("offset", 0)
                    moved = rotate(job["log"])
                    if moved is not None:
                        # what the job wrote after this read went into the copy: forward it from there
                        # (the job's last progress line was never sent when it landed in that gap)
                        data = _read_rotated(job["log"], start, moved) or data
                        latest = _whole_lines(job, data, send_event) or latest
                        job["offset"] = 0
                        break
                    job["rotate_after"] = time.time() + 60.0  # no room for the copy: not every poll
                latest = _whole_lines(job, data, send_event) or latest
                if caught_up:
                    break
    except OSError:
        pass
    if latest is not None:
        job["progress"] = latest
        send_event("progress", job_id=job["job_id"], generation=job["generation"], progress=latest)


def _read_rotated(log, start, end):
    """Bytes ``start:end`` of the copy a rotation just made; None when it cannot be read."""
    try:
        with open(rotated_path(log), "rb") as fh:
            fh.seek(start)
            return fh.read(min(end - start, READ_BUDGET))
    except (OSError, ValueError):
        return None


def _whole_lines(job, data, send_event):
    """Advance past the whole lines of ``data``; the latest progress among them, if any."""
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= READ_CHUNK:  # a huge line without newline: skip it
            job["offset"] = job.get("offset", 0) + len(data)
        return None
    job["offset"] = job.get("offset", 0) + end + 1
    latest = None
    for line in data[:end].split(b"\n"):
        if b"@heet-progress" in line:
            parsed, problem = read_progress_line(line)
            before = (latest or job.get("progress") or {}).get("step")
            if parsed is not None and before is not None and parsed["step"] < before:
                # one process does not go back: a script counting something else (it read 5 after 229)
                parsed, problem = None, "step went back from %d to %d within one run" % (before, parsed["step"])
            if parsed is not None:
                latest = parsed
            elif problem is not None and _first_of_its_kind(job, problem):
                text = as_shown(line.decode("utf-8", errors="replace")).strip()
                send_event("progress_error", job_id=job["job_id"], generation=job["generation"],
                                line=text[:MAX_BAD_LINE], error=problem)
    return latest


def _first_of_its_kind(job, problem):
    """Each kind of problem is said once per job process, a few kinds at most: said once for all,
    the first (single quotes, say) hid a later wild step after which every good line was refused
    as "went back", and the job sat at 7,142,857% of its target with nothing said."""
    kind = problem_kind(problem)
    said = job.setdefault("progress_problems_said", [])
    if kind in said or len(said) >= MAX_PROBLEM_KINDS:
        return False
    said.append(kind)
    return True
