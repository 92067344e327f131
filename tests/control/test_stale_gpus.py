"""GPUs of this store's fenced runs, still stopping, are not free. After a controller crash new
profiling runs were started on the GPUs of the old ones, which saved for 6 s more beside them."""

from __future__ import annotations

from dataclasses import dataclass

from heet_tui.cluster.events import RemoteJob
from heet_tui.control.runtime import stale_gpus


@dataclass
class _Status:
    name: str


class _Cluster:
    """What the agents last reported, as stale_gpus reads it."""

    def __init__(self, jobs: dict[str, list[RemoteJob]]) -> None:
        self._jobs = jobs

    def status(self):
        return tuple(_Status(h) for h in self._jobs)

    def jobs(self, host: str):
        return self._jobs[host]


def _job(host: str, agent_id: str, generation: int, gpus: tuple[int, ...], state: str = "running") -> RemoteJob:
    return RemoteJob(host, agent_id, generation, state, 1, gpus)


def test_a_fenced_run_still_stopping_holds_its_gpus() -> None:
    cluster = _Cluster({
        "h1": [_job("h1", "S3.p1.12870ff1", 1, (0,)),  # fenced by the new controller, saving on SIGTERM
               _job("h1", "X2.r0.12870ff1", 4, (1,)),  # a run the controller owns
               _job("h1", "old.r0.12870ff1", 2, (2,), state="exited")],  # gone
        "h2": [_job("h2", "S3.p2.12870ff1", 2, (0,)), _job("h2", "nb.r0.aaaaaaaa", 1, (1,))],  # another store's
    })
    fenced = {("h1", "S3.p1.12870ff1", 1), ("h2", "S3.p2.12870ff1", 2), ("h1", "old.r0.12870ff1", 2)}
    assert stale_gpus(cluster, fenced) == {"h1": {0}, "h2": {0}}, "the fenced ones still running; not X2's GPU"
    # the job's own stale process is its agent's to wait for (a relaunch under its name is refused
    # until it has gone); a plan step or launch of that job is not failed for it
    assert stale_gpus(cluster, fenced, except_job="S3") == {}
    assert stale_gpus(cluster, set()) == {}, "nothing fenced: a run that just ended is no stale run"
