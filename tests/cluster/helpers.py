"""Shared helpers for cluster tests: run a Cluster against a lab for the length of a test."""

from __future__ import annotations

import asyncio
from pathlib import Path

from heet_tui.cluster import Cluster, ClusterOptions
from heet_tui.config.hosts_file import load_hosts

FAST = ClusterOptions(heartbeat_s=0.5, heartbeat_timeout_s=4.0, backoff_initial_s=0.2, backoff_max_s=1.0,
                      connect_timeout_s=10.0, keepalive_s=1.0, probes=())


def make_cluster(hosts_path: Path, options: ClusterOptions = FAST) -> Cluster:
    return Cluster(load_hosts(hosts_path), options)


async def wait_until(predicate, timeout: float = 15.0, step: float = 0.05) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return predicate()


def run_settled(path: Path, scenario):
    """``scenario(cluster)`` once every host of the hosts file ``path`` has connected or failed."""
    async def main():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=30)
            return await scenario(cluster)
        finally:
            await cluster.stop()

    return asyncio.run(main())


async def statuses(cluster: Cluster) -> dict:
    """Each host's status by name."""
    return {s.name: s for s in cluster.status()}
