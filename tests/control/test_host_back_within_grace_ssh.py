"""A host back before the end of its grace period is reconnected in time, whatever the link's
backoff has grown to (host_loss.py, ``to_try_now``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from control_lab import run_and_clean
from support.sshd import SshLab

from heet_tui.cluster import ClusterOptions
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.host import HostState


def test_a_host_back_before_its_deadline_is_not_lost_to_a_long_backoff(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen: sshd back 10 s before the deadline the controller had announced; the link's next try
    came 28 s later, the host was counted lost, and its healthy job was stopped."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    lab = SshLab(tmp_path / "lab")
    server = lab.add_host("h")
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(server, emulate={"gpu_type": "A100", "count": 1,
                                                                       "speed": 1.0})], python=sys.executable))
    # every retry of the link waits 20-40 s: longer than the whole grace period
    slow = ClusterOptions(heartbeat_s=0.5, heartbeat_timeout_s=3.0, backoff_initial_s=40.0, backoff_max_s=60.0,
                          connect_timeout_s=5.0, keepalive_s=1.0, probes=())
    options = ControllerOptions(interval_s=0.3, auto_approve=False, profile=False, cluster=slow,
                                host_loss_grace_s=20.0)
    store = Store(tmp_path / "state")
    seen: list[str] = []

    async def until(predicate, timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            assert loop.time() < deadline, f"{what}: {seen[-3:]}"
            await asyncio.sleep(0.2)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            status = lambda: ctl.cluster.host_status("h")  # noqa: E731
            await until(lambda: status().state is HostState.READY, 30, "h ready")
            server.kill()
            await until(lambda: "h" in ctl.host_grace.holding(), 15, "h out, its grace begun")
            await asyncio.sleep(2.0)
            server.start()
            await until(lambda: seen.append(status().message) or status().state is HostState.READY, 17,
                        "h back within its grace")
            assert "h" not in ctl.host_grace.holding()
        finally:
            await ctl.stop()

    try:
        run_and_clean(scenario, tmp_path)
    finally:
        lab.close()
    assert not [e for e in store.events(limit=200) if e.kind == "host-lost"], "never counted lost"
