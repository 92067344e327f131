"""A GPU reading that hangs (nvidia-smi when a GPU falls off the bus) neither stalls the agent
nor goes unsaid: the agent reads the GPUs beside its loop and reports what is wrong."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time

from heet_agent.gpu_sampler import GpuSampler
from helpers import wait_until
from support.gpu_box import recorded_gpu_box

from heet_tui.cluster import Cluster
from heet_tui.cluster.options import ClusterOptions
from heet_tui.config.hosts_file import load_hosts
from heet_tui.core.host import HostState


def test_a_reading_that_never_returns_is_reported_stuck_and_not_sent_as_current() -> None:
    hung, calls = threading.Event(), []

    def read():
        calls.append(1)
        if len(calls) > 1:
            hung.wait()  # as nvidia-smi in the kernel after an Xid 79: SIGKILL does not end it
        return [{"index": 0, "utilization": 40.0}]

    sampler = GpuSampler(read, period_s=0.05, what="nvidia-smi", stuck_s=0.3)
    sampler.start()
    deadline = time.monotonic() + 10
    while sampler.sample()[0] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sampler.sample() == ([{"index": 0, "utilization": 40.0}], None)
    while sampler.sample()[1] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    gpus, problem = sampler.sample()
    assert problem.startswith("nvidia-smi has not answered for") and "fallen off the bus" in problem
    while sampler.sample()[0] is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sampler.sample()[0] is None, "an old reading is not sent as current"
    hung.set()

    def broken():
        raise OSError("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")

    failing = GpuSampler(broken, period_s=0.05, what="nvidia-smi")
    failing.start()
    while failing.sample()[1] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert failing.sample() == (None, "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate "
                                      "with the NVIDIA driver")


def test_the_agent_answers_while_nvidia_smi_hangs_and_the_host_says_so(tmp_path, monkeypatch) -> None:
    flag = tmp_path / "hang"
    hosts, _ = recorded_gpu_box(tmp_path, monkeypatch, prelude=f"if [ -e {flag} ]; then sleep 27; fi")

    async def scenario() -> None:
        async with Cluster(load_hosts(hosts), ClusterOptions(heartbeat_s=0.5)) as cluster:
            assert await cluster.wait_for_state("box", HostState.READY, 30)
            flag.touch()
            said = "GPUs not read: nvidia-smi: did not answer within 5 s"
            reported = await wait_until(lambda: said in cluster.host_status("box").message, 30)
            assert reported, cluster.host_status("box").message
            _, client = cluster._client("box")
            for _ in range(4):  # each nvidia-smi call now blocks for 5 s: the loop must not
                await client.request("ping", {}, 2.0)
                await asyncio.sleep(0.7)
            assert cluster.host_status("box").state is HostState.READY
            flag.unlink()
            assert await wait_until(lambda: "not read" not in cluster.host_status("box").message, 30)

    try:
        asyncio.run(scenario())
    finally:
        subprocess.run(["pkill", "-f", "^sleep 27$"], check=False)
