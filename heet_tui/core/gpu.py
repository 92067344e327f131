"""GPUs as the scheduler and the UI see them."""

from __future__ import annotations

from dataclasses import dataclass


def type_allowed(gpu_type: str, allowed: tuple[str, ...]) -> bool:
    """Whether a job that lists ``allowed`` (empty: any) may run on ``gpu_type``.

    Job specs are written by hand: "a100" means the A100s. Matched exactly, it left the job
    waiting for a type no host would ever report.
    """
    return not allowed or gpu_type.casefold() in {t.casefold() for t in allowed}


@dataclass(frozen=True, slots=True)
class GpuType:
    """A GPU model name as used across profiles, hosts and plans (e.g. ``"T4"``, ``"A100"``)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical (or declared emulated) GPU on a host.

    ``source`` records where the inventory came from (``nvml``, ``nvidia-smi`` or
    ``emulated``) so the UI can never present an emulated GPU as a real one.
    """

    index: int
    gpu_type: str
    memory_mb: int = 0
    uuid: str = ""
    source: str = "emulated"
    utilization: float | None = None
    memory_used_mb: int | None = None
    # processes heet did not start, computing on it while no heet job holds it ("pid 4242 python
    # (alice)"): someone's notebook on a shared host; plans keep off it (gpu_users.py on the agent)
    others: tuple[str, ...] = ()
