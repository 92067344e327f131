"""The protocol and progress parsers are total: any input gives a value or a reason, never an exception."""

from __future__ import annotations

import json

from heet_agent.progress import parse_progress_line
from heet_agent.protocol import decode_line, encode, message_kind
from hypothesis import given, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_decode_line_never_raises_on_bytes(raw):
    message, problem = decode_line(raw)
    assert (message is None) != (problem is None)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_decode_line_on_any_json(value):
    message, problem = decode_line(json.dumps(value).encode())
    if message is not None:
        assert isinstance(message, dict) and message_kind(message) in ("request", "event", "reply")
    else:
        assert problem


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.text(min_size=1, max_size=10))
def test_encode_decode_round_trip(fields, op):
    message = {"id": 1, "op": op, "args": fields}
    decoded, problem = decode_line(encode(message))  # never raises, even with NaN/inf inside
    assert problem is None and decoded["op"] == op
    if "inf" not in repr(fields) and "nan" not in repr(fields):
        assert decoded == message


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200) | st.builds(lambda v: "@heet-progress " + json.dumps(v), json_values))
def test_progress_parser_never_raises(line):
    parsed = parse_progress_line(line)
    assert parsed is None or {"step", "samples", "samples_per_s"} <= set(parsed)


def test_progress_parser_examples():
    line = '@heet-progress {"step": 120, "samples": 7680, "samples_per_s": 512.3, "loss": 1.93, "checkpoint": null}'
    assert parse_progress_line(line) == {"step": 120, "samples": 7680, "samples_per_s": 512.3, "loss": 1.93,
                                         "checkpoint": None}
    assert parse_progress_line('@heet-progress {"step": 1, "samples": 2}') is None
    assert parse_progress_line("step 1") is None
    for prefix in ("\r 40%|####  |", "INFO:root:", "[rank0]: "):
        assert parse_progress_line(prefix + '@heet-progress {"step": 1, "samples": 2, "samples_per_s": 3}')["step"] == 1
    assert decode_line(b"Welcome!\n")[1] == "not JSON: 'Welcome!'"


def test_counts_beyond_any_real_job_are_refused_with_a_reason():
    """A step of 10**30 was forwarded, and the controller's store failed on it at every report
    (OverflowError), so the job ended "without reporting progress"."""
    from heet_agent.progress import progress_problem

    line = '@heet-progress {"step": 1000000000000000000000000000000, "samples": 1, "samples_per_s": 3}'
    assert parse_progress_line(line) is None
    assert progress_problem(line) == "step or samples beyond any real job (at most 1000000000000000)"


def test_a_report_an_agent_forwards_is_checked_again_by_the_controller():
    """A corrupted agent's NaN speed (read as None) raised in every round: planning stopped."""
    import asyncio

    from heet_tui.cluster.events import JobProgress, JobProgressError, RemoteJob
    from heet_tui.cluster.supervisor import HostSupervisor
    from heet_tui.config.hosts_file import HostEntry
    from heet_tui.core.host import HostState

    published = []
    sup = HostSupervisor(HostEntry("h", "127.0.0.1"), None, None, published.append, asyncio.Semaphore(1))
    sup.state = HostState.READY
    good = {"step": 3, "samples": 96, "samples_per_s": 50.0}
    for progress in (good, {**good, "samples_per_s": None}, {**good, "step": 10 ** 30}):
        sup._on_event({"event": "progress", "job_id": "j.r0", "generation": 1, "progress": progress})
    assert isinstance(published[0], JobProgress) and published[0].progress == good
    assert [type(e) for e in published[1:]] == [JobProgressError, JobProgressError]
    assert "samples_per_s is not a finite number" in published[1].error and "beyond any real job" in published[2].error
    # a heartbeat's latest report of a job is checked the same way
    job = RemoteJob.from_wire("h", {"job_id": "j.r0", "generation": 1, "state": "running",
                                    "progress": {**good, "samples_per_s": None}})
    assert job.progress is None
