"""A GPU reading that hangs (nvidia-smi when a GPU falls off the bus) neither stalls the agent
nor goes unsaid: the agent reads the GPUs beside its loop and reports what is wrong."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import types

import pytest
from heet_agent.gpu_sampler import GpuSampler
from heet_agent.inventory import ProbeTimeout, probe_gpus
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
        async with Cluster(load_hosts(hosts), ClusterOptions(heartbeat_s=0.5, gpu_read_limit_s=1.5)) as cluster:
            assert await cluster.wait_for_state("box", HostState.READY, 30)
            flag.touch()
            said = "GPUs not read: nvidia-smi: did not answer within 1.5 s"
            reported = await wait_until(lambda: said in cluster.host_status("box").message, 30)
            assert reported, cluster.host_status("box").message
            _, client = cluster._client("box")
            for _ in range(4):  # each nvidia-smi call now blocks for 1.5 s: the loop must not
                await client.request("ping", {}, 2.0)
                await asyncio.sleep(0.7)
            assert cluster.host_status("box").state is HostState.READY
            flag.unlink()
            assert await wait_until(lambda: "not read" not in cluster.host_status("box").message, 30)

    try:
        asyncio.run(scenario())
    finally:
        subprocess.run(["pkill", "-f", "^sleep 27$"], check=False)


def test_a_gpu_reading_stuck_at_connect_is_not_taken_for_a_host_without_gpus(monkeypatch) -> None:
    released = threading.Event()

    def stuck(*_args: object) -> None:
        released.wait()  # NVML inside the driver: no signal, no timeout reaches it

    fake = types.ModuleType("pynvml")
    fake.nvmlInit = stuck  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    try:
        with pytest.raises(ProbeTimeout, match=r"^nvml: has not answered within 0.3 s \(a GPU may have fallen off"):
            probe_gpus(None, ("nvml", "nvidia-smi"), limit_s=0.3)
        source, gpus, notes = probe_gpus({"gpu_type": "T4", "count": 2, "speed": 1.0}, ("nvml",), limit_s=0.3)
        assert (source, len(gpus)) == ("emulated", 2), "a declared emulation comes up; the real GPUs only warn"
        assert notes == ["nvml: has not answered within 0.3 s (a GPU may have fallen off the bus: look for Xid "
                         "errors in dmesg)"]
    finally:
        released.set()


def test_a_host_whose_nvidia_smi_hangs_at_connect_fails_says_why_and_comes_up_once_it_answers(
        tmp_path, monkeypatch) -> None:
    flag = tmp_path / "hang"
    flag.touch()
    hosts, _ = recorded_gpu_box(tmp_path, monkeypatch, prelude=f"if [ -e {flag} ]; then sleep 28; fi")
    options = ClusterOptions(heartbeat_s=0.5, connect_timeout_s=4.5, backoff_max_s=1.0, probes=("nvidia-smi",))

    async def scenario() -> None:
        async with Cluster(load_hosts(hosts), options) as cluster:
            said = "GPUs not read: nvidia-smi: did not answer within"
            failed = await wait_until(lambda: said in cluster.host_status("box").message, 30)
            status = cluster.host_status("box")
            assert failed, status.message
            assert status.state is not HostState.READY and "connect is tried again" in status.message
            flag.unlink()
            assert await cluster.wait_for_state("box", HostState.READY, 30), cluster.host_status("box").message
            assert len(cluster.host_status("box").gpus) == 2

    try:
        asyncio.run(scenario())
    finally:
        subprocess.run(["pkill", "-f", "^sleep 28$"], check=False)
