"""A job's output for the Jobs screen: the last lines rank 0 of its latest run wrote.

Fetched on request (the `l` key), not every round: each fetch is one request to one agent.
Rank 0 prints the progress lines and, in most scripts, the rest worth reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.cluster import ClusterError
from heet_tui.control.runtime import rank_agent_id

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller

MAX_LINES = 500


async def job_log(ctl: Controller, job_id: str, lines: int = 200) -> tuple[str, ...]:
    rec = ctl.store.job(job_id)
    if rec is None:
        raise ValueError(f"no job {job_id!r}")
    lines = max(1, min(int(lines), MAX_LINES))
    run = ctl.executor.runs.get(job_id)
    if run is not None and 0 in run.ranks:
        host, agent_id, generation = run.ranks[0].host, run.ranks[0].agent_id, run.generation
    else:
        last = ctl.store.last_allocation(job_id)
        if last is None:
            return ctl.executor.log_tails.get(job_id) or (f"{job_id} has not run yet (profiling runs keep "
                                                          "no log here)",)
        alloc, generation = last
        host, agent_id = alloc.hosts[0][0], rank_agent_id(job_id, 0, ctl.store.store_id)
    try:
        found = await ctl.cluster.log_tail(host, agent_id, lines=lines, generation=generation)
    except ClusterError as exc:
        raise ValueError(f"{job_id}: cannot read its log on {host}: {exc}") from None
    header = f"{job_id} generation {generation}, rank 0 on {host}, last {len(found)} line(s):"
    return (header, *found)
