"""heet-tui's own channels never get a terminal, whatever the SSH config asks for.

Seen: with ``RequestTTY force`` for a host (set for interactive logins), the agent's stdin was a
pty; a launch message over 4,095 bytes (a job with one long environment value) was cut by the
terminal's line discipline, the agent never answered, and every plan step there failed with
"no reply to launch within 30 s" while ``hosts check`` read "ready"."""

from __future__ import annotations

import asyncio
import sys

from helpers import make_cluster

from heet_tui.cluster import JobExited

SCRIPT = "import os, sys; print('stdin tty', os.isatty(0), 'big', len(os.environ['BIG']), flush=True)"


def test_a_config_that_forces_a_tty_still_launches_a_job_with_a_long_environment(lab):
    lab.write_ssh_config(lab.user_key, extra="Host *\n  RequestTTY force\n")
    a = lab.add_host("tty-host")
    path = lab.hosts_toml([lab.entry_for(a, emulate={"gpu_type": "T4", "count": 1, "speed": 1.0})])

    async def scenario() -> tuple[JobExited, tuple[str, ...]]:
        cluster = make_cluster(path)
        events = cluster.events()
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=30)
            await cluster.launch("tty-host", "big-env", 1, [sys.executable, "-c", SCRIPT],
                                 env={"BIG": "x" * 6000}, gpus=[0])
            async for event in events:
                if isinstance(event, JobExited) and event.job.job_id == "big-env":
                    return event, tuple(await cluster.log_tail("tty-host", "big-env", lines=20))
            raise AssertionError("no exit")
        finally:
            await cluster.stop()

    exited, tail = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert exited.job.exit_code == 0, tail
    assert any("big 6000" in line for line in tail), tail
