"""The environment the agent gives a launched job."""

from __future__ import annotations

from heet_agent.job_env import job_environment


def test_gpus_are_numbered_by_pci_bus_whatever_the_hosts_environment_says() -> None:
    """A FASTEST_FIRST in the agent's own environment (/etc/environment under sshd) survived, and
    on a host of mixed GPUs the indices named other GPUs than the ones NVML listed."""
    env = job_environment({"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "PATH": "/usr/bin"}, {}, "j.r0.1", 1, [1], [1, 2],
                          None)
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert env["PATH"] == "/usr/bin" and env["HEET_JOB_ID"] == "j.r0.1"
