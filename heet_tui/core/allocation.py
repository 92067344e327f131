"""Allocations: which GPUs of which hosts a job holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def placement_key(counts: tuple[int, ...]) -> str:
    """Sia-style placement string: GPUs per host, largest first (``(2, 4) -> "42"``).

    Digits only work below 10 GPUs a host, which is what the profile format allows; larger
    counts are written with ``-`` separators so the key stays unambiguous.
    """
    ordered = sorted(counts, reverse=True)
    if all(c < 10 for c in ordered):
        return "".join(str(c) for c in ordered)
    return "-".join(str(c) for c in ordered)


@dataclass(frozen=True, slots=True)
class Allocation:
    """One job's GPUs: a single GPU type, spread over one or more hosts.

    ``hosts`` is a sorted tuple of ``(host name, sorted GPU indices)`` so that allocations are
    hashable, comparable and deterministic.
    """

    job_id: str
    gpu_type: str
    hosts: tuple[tuple[str, tuple[int, ...]], ...]

    @staticmethod
    def of(job_id: str, gpu_type: str, hosts: Mapping[str, list[int] | tuple[int, ...]]) -> Allocation:
        norm = tuple(sorted((h, tuple(sorted(ix))) for h, ix in hosts.items() if ix))
        return Allocation(job_id, gpu_type, norm)

    @property
    def num_gpus(self) -> int:
        return sum(len(ix) for _, ix in self.hosts)

    @property
    def placement(self) -> tuple[int, ...]:
        """GPUs per host, largest first: what a throughput function is keyed by."""
        return tuple(sorted((len(ix) for _, ix in self.hosts), reverse=True))

    @property
    def host_names(self) -> tuple[str, ...]:
        return tuple(h for h, _ in self.hosts)

    def gpus_on(self, host: str) -> tuple[int, ...]:
        for h, ix in self.hosts:
            if h == host:
                return ix
        return ()

    def ranks_on_hosts(self) -> str:
        """Which ranks run where ("ranks 0-1 on a, 2-3 on b"), as the launch numbers them (hosts in
        order, their GPUs in order): ``log --rank R`` and a rank's crash name a rank, and nothing
        said which host holds it. "" on one host, where every rank is there."""
        if len(self.hosts) < 2:
            return ""
        parts, rank = [], 0
        for host, ix in self.hosts:
            parts.append(f"{rank}{'-' + str(rank + len(ix) - 1) if len(ix) > 1 else ''} on {host}")
            rank += len(ix)
        return "ranks " + ", ".join(parts)

    def describe(self) -> str:
        if not self.hosts:
            return "-"
        parts = ",".join(f"{h}[{','.join(map(str, ix))}]" for h, ix in self.hosts)
        return f"{self.num_gpus}x{self.gpu_type} on {parts}"
