"""An agent that sends heartbeats but answers no request is taken out, not left "ready".

Seen in a security review (a compromised host's agent, through a relay that dropped replies):
the host stayed ready while every launch there waited out its 30 s timeout, and the plans that
kept choosing it held up the whole cluster's steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import make_cluster, wait_until
from support.script_agent import host_run_by

from heet_tui.cluster import supervisor
from heet_tui.core.host import HostState

DEAF_AGENT = f"""#!{sys.executable}
import json, os, select, sys, time

def send(m):
    sys.stdout.write(json.dumps(m) + "\\n")
    sys.stdout.flush()

send({{"event": "agent_start", "protocol": 1, "agent_version": "deaf", "pid": os.getpid()}})
answered = 0
while True:
    if select.select([sys.stdin], [], [], 0.3)[0]:
        line = sys.stdin.readline()
        if not line:
            break
        m = json.loads(line)
        if answered < 2:  # hello and the first ping; then nothing
            answered += 1
            result = {{"protocol": 1, "agent_version": "deaf", "pid": os.getpid(),
                      "inventory": {{"source": "emulated", "gpus": [{{"index": 0, "name": "T4", "memory_mb": 1}}]}},
                      "jobs": []}} if m["op"] == "hello" else {{}}
            send({{"id": m["id"], "ok": True, "result": result}})
    send({{"event": "heartbeat", "seq": 1, "jobs": [], "gpus": []}})
"""


def test_an_agent_that_heartbeats_but_answers_nothing_is_taken_out(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    monkeypatch.setattr(supervisor, "PING_EVERY_S", 0.5)
    hosts = host_run_by(tmp_path, "deaf", DEAF_AGENT)

    async def scenario():
        cluster = make_cluster(hosts)
        await cluster.start()
        try:
            assert await wait_until(lambda: cluster.host_status("deaf").state is HostState.READY, 15)
            assert await wait_until(lambda: cluster.host_status("deaf").state is HostState.AGENT_ERROR, 30)
            return cluster.host_status("deaf").message
        finally:
            await cluster.stop()

    message = asyncio.run(scenario())
    assert "sends heartbeats but answered none of 2 pings" in message, message


def test_a_slow_links_pings_are_given_ten_round_trips() -> None:
    """At 2 s round trips and 20 % loss a live agent was called stuck ("answered none of 2 pings
    in 10 s each"): a ping waits ten measured round trips, at least the heartbeat timeout."""
    import asyncio

    from heet_tui.cluster.options import ClusterOptions
    from heet_tui.cluster.supervisor import HostSupervisor
    from heet_tui.config.hosts_file import HostEntry

    sup = HostSupervisor(HostEntry("h", "h"), None, ClusterOptions(heartbeat_timeout_s=10.0), lambda e: None,
                         asyncio.Semaphore(1))
    assert sup._ping_timeout() == 10.0, "nothing measured yet"
    sup.rtt_ms = 300.0
    assert sup._ping_timeout() == 10.0
    sup.rtt_ms = 2400.0
    assert sup._ping_timeout() == 24.0
