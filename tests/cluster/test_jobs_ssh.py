"""Run real processes through real sshd: progress, log tail, stop, fencing, surviving a lost host."""

from __future__ import annotations

import asyncio
import os
import sys

from helpers import make_cluster, wait_until

from heet_tui.cluster import AgentRequestError, JobExited, JobProgress, JobsReported
from heet_tui.core.host import HostState

# A job that reports progress like examples/training.py, and checkpoints on SIGTERM.
TRAINER = r"""
import json, os, signal, sys, time
def term(*_):
    print("checkpoint saved at step", step, flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
step = 0
print("speed", os.environ.get("HEET_EMULATED_SPEED"), "gpus", os.environ.get("HEET_EMULATED_GPUS"),
      "cuda", repr(os.environ.get("CUDA_VISIBLE_DEVICES")),
      "gen", os.environ.get("HEET_GENERATION"), "rank", os.environ.get("RANK"), flush=True)
while True:
    step += 1
    print("@heet-progress " + json.dumps({"step": step, "samples": step * 32, "samples_per_s": 64.0,
          "loss": 1.0 / step, "checkpoint": None}), flush=True)
    time.sleep(0.1)
"""


def trainer_argv() -> list[str]:
    return [sys.executable, "-u", "-c", TRAINER]


def test_launch_progress_log_tail_stop_and_fence(lab):
    a = lab.add_host("gpu-a")
    path = lab.hosts_toml([lab.entry_for(a, emulate={"gpu_type": "T4", "count": 2, "speed": 0.25})])

    async def scenario():
        cluster = make_cluster(path)
        events = cluster.events()
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=30)
            job = await cluster.launch("gpu-a", "job1", 1, trainer_argv(), env={"RANK": "0"}, gpus=[1])
            assert job.state == "running" and job.pid > 0
            progress = []
            async for event in events:
                if isinstance(event, JobProgress) and event.job_id == "job1":
                    progress.append(event.progress)
                    if event.progress["step"] >= 3:
                        break
            tail = await cluster.log_tail("gpu-a", "job1", lines=200)
            with_gpus = cluster.host_status("gpu-a").gpu_jobs
            with_gpus_after_hb = await wait_until(lambda: cluster.host_status("gpu-a").gpu_jobs == ((1, "job1"),))
            # a second launch of a running job is refused; fencing generation 1 stops it
            try:
                await cluster.launch("gpu-a", "job1", 2, trainer_argv())
                refused = False
            except AgentRequestError as exc:
                refused = "still running" in str(exc)
            fenced = await cluster.fence("gpu-a", "job1", min_generation=2, grace_s=5)
            exited = await asyncio.wait_for(_next_exit(events), 15)
            try:
                await cluster.launch("gpu-a", "job1", 1, trainer_argv())
                stale_refused = False
            except AgentRequestError as exc:
                stale_refused = "fenced" in str(exc)
            job2 = await cluster.launch("gpu-a", "job1", 2, trainer_argv())
            await asyncio.sleep(0.3)
            stopped = await cluster.stop_job("gpu-a", "job1", grace_s=5)
            return progress, tail, with_gpus or with_gpus_after_hb, refused, fenced, exited, stale_refused, job2, stopped
        finally:
            await cluster.stop()

    progress, tail, gpu_jobs, refused, fenced, exited, stale_refused, job2, stopped = asyncio.run(scenario())
    assert [p["step"] for p in progress][-1] >= 3
    assert all(p["samples_per_s"] == 64.0 for p in progress)
    # env reached the job: emulation, its GPUs (real ones hidden), generation
    assert "speed 0.25 gpus 1 cuda '' gen 1 rank 0" in tail
    assert any(line.startswith("@heet-progress") for line in tail)
    assert gpu_jobs
    assert refused and stale_refused
    assert [j.generation for j in fenced] == [1]
    assert exited.job.generation == 1 and exited.job.exit_code == 3 and exited.job.reason == "fenced"
    assert job2.generation == 2
    assert stopped.state == "exited" and stopped.exit_code == 3 and stopped.reason == "stopped"


async def _next_exit(events):
    async for event in events:
        if isinstance(event, JobExited):
            return event


def test_lost_host_goes_unreachable_others_stay_ready_and_job_is_readopted(lab):
    a, b = lab.add_host("node-a"), lab.add_host("node-b")
    path = lab.hosts_toml([lab.entry_for(a), lab.entry_for(b)])

    async def scenario():
        cluster = make_cluster(path)
        seen = []

        async def collect():
            async for event in cluster.events():
                seen.append(event)

        collector = asyncio.ensure_future(collect())
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=30)
            job = await cluster.launch("node-a", "long", 7, trainer_argv())
            await asyncio.sleep(0.5)
            a.kill()
            assert await cluster.wait_for_state("node-a", HostState.UNREACHABLE, 15), cluster.host_status("node-a")
            message = cluster.host_status("node-a").message
            other = cluster.host_status("node-b").state
            job_alive_meanwhile = _alive(job.pid)
            a.start()
            assert await cluster.wait_for_state("node-a", HostState.READY, 20), cluster.host_status("node-a")
            await asyncio.sleep(0.1)
            reports = [e for e in seen if isinstance(e, JobsReported) and e.host == "node-a"]
            return job, message, other, job_alive_meanwhile, reports
        finally:
            collector.cancel()
            await cluster.stop()

    job, message, other, alive, reports = asyncio.run(scenario())
    assert other is HostState.READY
    assert "lost" in message or "cannot connect" in message or "heartbeat" in message, message
    assert alive
    assert len(reports) == 2 and reports[0].jobs == ()  # first connect: nothing; after the restart: the job
    readopted = reports[1].jobs
    assert [j.job_id for j in readopted] == ["long"]
    assert readopted[0].adopted and readopted[0].state == "running"
    assert readopted[0].pid == job.pid and readopted[0].generation == 7
    os.killpg(job.pid, 9)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
