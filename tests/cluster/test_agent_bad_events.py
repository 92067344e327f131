"""Events whose fields have the wrong types are left out, with one warning; the host stays up.

A heartbeat with a job's generation "x" ended the session as "the agent sent a line longer than
the controller reads"; the next heartbeat did the same after each reconnect (out and back every
half second), and a GPU utilization of "LOTS" went into every snapshot, which each attached TUI
and `heet-tui status` then refused.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from helpers import make_cluster, wait_until
from support.script_agent import host_run_by

from heet_tui.core.host import HostState

AGENT = f"""#!{sys.executable}
import json, os, sys

def send(m):
    sys.stdout.write(json.dumps(m) + "\\n")
    sys.stdout.flush()

send({{"event": "agent_start", "protocol": 1, "agent_version": "fake", "pid": os.getpid()}})
for line in sys.stdin:
    m = json.loads(line)
    if m["op"] == "hello":
        gpus = [{{"index": 0, "name": "T4", "memory_mb": 1000, "utilization": "LOTS"}}]
        send({{"id": m["id"], "ok": True, "result": {{"protocol": 1, "agent_version": "fake", "pid": os.getpid(),
              "inventory": {{"source": "emulated", "gpus": gpus}}, "jobs": []}}}})
        continue
    send({{"id": m["id"], "ok": True, "result": {{}}}})
    send({{"event": "heartbeat", "seq": 1, "jobs": [{{"job_id": "a.r0.12345678", "generation": "x"}}],
          "gpus": [{{"index": 0, "utilization": "LOTS", "memory_used_mb": [1]}}]}})
"""


def test_a_malformed_event_is_left_out_and_the_host_stays_ready(tmp_path: Path, caplog) -> None:
    hosts = host_run_by(tmp_path, "odd", AGENT)
    caplog.set_level(logging.WARNING, logger="heet_tui")

    async def scenario():
        cluster = make_cluster(hosts)
        states: list[HostState] = []
        await cluster.start()
        try:
            assert await wait_until(lambda: cluster.host_status("odd").state is HostState.READY, 15)
            for _ in range(30):  # about six heartbeats
                states.append(cluster.host_status("odd").state)
                await asyncio.sleep(0.1)
            return states, cluster.host_status("odd")
        finally:
            await cluster.stop()

    states, status = asyncio.run(scenario())
    assert set(states) == {HostState.READY}, f"it dropped out: {states}"
    assert [g.utilization for g in status.gpus] == [None] and [g.memory_used_mb for g in status.gpus] == [None]
    warned = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert warned == ["odd: the agent sent a malformed 'heartbeat' event, left out (ValueError: generation 'x' is "
                      "not a whole number from 0 to 2147483647)"], warned


def test_what_no_agent_of_ours_sends_is_refused_at_the_wire() -> None:
    """A compromised host claimed generation 2**63 (stored as a float, every plan after failed:
    "Python int too large to convert to SQLite INTEGER") and a process on 120,000 GPUs ("GPUs
    120000/4 busy", the controller and the TUI at 50-65 % CPU for good)."""
    import pytest

    from heet_tui.cluster.events import RemoteJob

    good = {"job_id": "j.r0.12345678", "generation": 3, "state": "running", "gpus": [0, 1]}
    assert RemoteJob.from_wire("h", good).generation == 3
    for bad in ({"generation": 2**63 - 1}, {"generation": -1}, {"generation": True}, {"generation": 2.5},
                {"gpus": list(range(120_000))}, {"gpus": [2000]}, {"gpus": "0,1"}, {"gpus": [True]}):
        with pytest.raises(ValueError):
            RemoteJob.from_wire("h", {**good, **bad})
    assert len(RemoteJob.from_wire("h", {**good, "job_id": "x" * 200_000}).job_id) == 256



def test_events_kept_before_a_hosts_hello_are_bounded_in_size() -> None:
    """1,000 of the protocol's 1 MiB lines before its hello came to 1 GiB at every reconnect."""
    from heet_tui.cluster.events import EarlyEvents

    early = EarlyEvents()
    big = {"event": "progress", "job_id": "j", "generation": 1, "progress": {"x": "y" * 900_000}}
    for _ in range(100):
        early.add(big)
    assert len(early.events) == EarlyEvents.MAX_BYTES // len(repr(big)), len(early.events)
    small = EarlyEvents()
    for i in range(5000):
        small.add({"event": "job_exit", "job_id": f"j{i}", "generation": 1})
    assert len(small.events) == EarlyEvents.MAX_COUNT


def test_a_job_on_gpus_the_host_lacks_is_not_counted_on_them() -> None:
    """A host claimed a process on GPUs 0..1023 of its two: `status` read "1024/2" GPUs in use."""
    import asyncio

    from heet_tui.cluster.events import RemoteJob
    from heet_tui.cluster.options import ClusterOptions
    from heet_tui.cluster.supervisor import HostSupervisor
    from heet_tui.config.hosts_file import HostEntry
    from heet_tui.core.gpu import Gpu

    sup = HostSupervisor(HostEntry("a", "a"), None, ClusterOptions(), lambda e: None, asyncio.Semaphore(1))
    sup.gpus = (Gpu(0, "A100", 0), Gpu(1, "A100", 0))
    sup._keep(RemoteJob("a", "x.r0.ffffffff", 1, "running", gpus=tuple(range(1024))))
    assert sup.status().gpu_jobs == ((0, "x.r0.ffffffff"), (1, "x.r0.ffffffff"))
