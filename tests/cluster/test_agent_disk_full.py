"""An agent whose workdir cannot take writes (a full disk, an exhausted quota) lives on, keeps
watching its jobs, says why on the host's line, and launches nothing until it can record it.

A directory where the job table's temporary file goes makes every save fail, as a full disk
does (root, which runs CI, ignores file modes; no filesystem has to be mounted).
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from helpers import make_cluster, wait_until

from heet_tui.cluster import AgentRequestError
from heet_tui.core.host import HostState


def test_an_agent_that_cannot_save_its_job_table_serves_on_and_says_why(tmp_path) -> None:
    workdir = tmp_path / "work"
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
                     f'workdir = "{workdir}"\nemulate = {{ gpu_type = "T4", count = 2, speed = 1.0 }}\n')
    blocker = workdir / "hosts" / "here" / "agent-state.json.tmp"

    said = "cannot save its job table in"

    async def first_agent() -> None:
        async with make_cluster(hosts) as cluster:
            assert await cluster.wait_for_state("here", HostState.READY, 20)
            await cluster.launch("here", "before", 1, ["sleep", "30"], gpus=[0])
            blocker.mkdir()  # from now on the disk is "full"
            await cluster.stop_job("here", "before", wait=False)  # a change the agent must record
            assert await wait_until(lambda: said in cluster.host_status("here").message, 20), \
                cluster.host_status("here").message
            status = cluster.host_status("here")
            assert status.state is HostState.READY and "nothing is launched here until it can" in status.message
            with pytest.raises(AgentRequestError, match="not launched: the agent cannot save its job table"):
                await cluster.launch("here", "refused", 1, ["sleep", "1"], gpus=[1])
            assert await wait_until(lambda: any(j.job_id == "before" and not j.running
                                                for j in cluster.jobs("here")), 20), "it still watches its jobs"

    async def next_agent() -> None:  # a reconnect while the disk is still full
        async with make_cluster(hosts) as cluster:
            assert await cluster.wait_for_state("here", HostState.READY, 20), cluster.host_status("here").message
            assert await wait_until(lambda: said in cluster.host_status("here").message, 20)
            blocker.rmdir()
            assert await wait_until(lambda: said not in cluster.host_status("here").message, 20)
            (blocker.parent / "exits" / "after-g1.json.tmp").mkdir()  # no room for the exit status either
            job = await cluster.launch("here", "after", 1, ["sh", "-c", "sleep 1; exit 3"], gpus=[1])
            assert job.running
            assert await wait_until(lambda: any(j.job_id == "after" and not j.running for j in cluster.jobs("here")))
            ended = next(j for j in cluster.jobs("here") if j.job_id == "after")
            assert (ended.exit_code, ended.reason) == (3, None), "its parent agent knows how it ended"

    asyncio.run(first_agent())
    asyncio.run(next_agent())
