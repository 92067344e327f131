"""What a compromised host's agent can make the controller do, held within bounds (a security
review played one through a wrapper in place of the real agent)."""

from __future__ import annotations

import asyncio

from heet_tui.cluster.options import ClusterOptions
from heet_tui.cluster.supervisor import MAX_JOBS_KEPT, HostSupervisor
from heet_tui.config.hosts_file import HostEntry

BOX = HostEntry("box", "127.0.0.1")


def test_an_agent_reporting_endless_jobs_is_held_to_a_bounded_table() -> None:
    """A compromised agent sent 3,000 new ended jobs every 0.2 s: the controller grew to 686 MB,
    and every heartbeat walked the whole table."""
    sup = HostSupervisor(BOX, None, ClusterOptions(), lambda event: None, asyncio.Semaphore(1))
    live = {"job_id": "live.r0.4a146a78", "generation": 1, "state": "running", "gpus": [0]}
    sup._on_heartbeat({"event": "heartbeat", "jobs": [live]})
    for wave in range(5):
        sup._on_heartbeat({"event": "heartbeat", "jobs": [
            {"job_id": f"x{wave}-{i}.r0.4a146a78", "generation": 1, "state": "exited", "exit_code": 0}
            for i in range(3000)]})
    assert len(sup.jobs) <= MAX_JOBS_KEPT
    assert ("live.r0.4a146a78", 1) in sup.jobs, "a running job is never the one let go"
