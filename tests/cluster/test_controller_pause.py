"""A controller that did not run for a while (kill -STOP, a suspended laptop) finds its agents'
heartbeats waiting unread: it took that for every host's silence, declared them all out at once
and replaced every agent, and its log read like a network outage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

WATCHER = """
import asyncio, json, sys
from dataclasses import replace
sys.path.insert(0, {tests!r})
from helpers import FAST, make_cluster
from heet_tui.cluster import HostChanged

async def main():
    cluster = make_cluster({hosts!r}, replace(FAST, heartbeat_s=0.25, heartbeat_timeout_s=1.0))
    await cluster.start()
    assert await cluster.wait_settled(timeout=20)
    events = cluster.events()
    print("ready", flush=True)
    await asyncio.sleep(4.0)
    states = []
    while (event := events.get_nowait()) is not None:
        if isinstance(event, HostChanged):
            states.append(event.status.state.value)
    print(json.dumps(states), flush=True)
    await cluster.stop()

asyncio.run(main())
"""


def test_a_pause_of_the_controllers_own_loses_no_host(tmp_path):
    workdir = tmp_path / "work"
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
                    f'workdir = "{workdir}"\nemulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n')
    script = WATCHER.format(tests=os.path.dirname(__file__), hosts=str(path))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        agent = (workdir / "hosts" / "here" / "agent.pid").read_text()
        child.send_signal(signal.SIGSTOP)  # the controller stands still; its agent heartbeats on
        time.sleep(2.5)
        child.send_signal(signal.SIGCONT)
        states = json.loads(child.stdout.readline())
        assert child.wait(30) == 0
    finally:
        child.kill()
    assert set(states) == {"ready"}, states
    assert (workdir / "hosts" / "here" / "agent.pid").read_text() == agent, "the same agent serves it"
