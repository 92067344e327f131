"""Generate workloads from the Philly trace: real arrival patterns, models matched by GPU time.

The shared workloads hold 160 jobs each; users want to ask about bigger clusters, busier days
or other windows. This samples ``jobs`` jobs from a seeded ``hours``-long window of the trace
that holds at least that many (windows start at a job's submission, so busy stretches, which
offer more starts, are picked more often than quiet ones), keeps their relative arrival times,
and gives each a model by its GPU time quantile in the sample (small: cifar10; larger:
deepspeech2 or bert; larger: yolov3; largest: imagenet), and a GPU count and batch size from
the configurations the shared Sia workloads use for that model (they scale reasonably on the
reference cluster), picked nearest to the trace job's GPU count.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from heet_tui.sim.csv_rows import read_rows
from heet_tui.sim.errors import SimInputError
from heet_tui.sim.workload import WorkloadJob

# (GPU-time quantile upper bound, models) — by the size classes.
SIZE_CLASSES: tuple[tuple[float, tuple[str, ...]], ...] = (
    (0.70, ("cifar10",)),
    (0.85, ("deepspeech2", "bert")),
    (0.95, ("yolov3",)),
    (1.00, ("imagenet",)),
)
# (num_replicas, batch_size) per model, as used by the shared Saturn/Philly workloads.
CONFIGS: dict[str, tuple[tuple[int, int], ...]] = {
    "cifar10": ((4, 2048), (6, 2048), (8, 2048), (8, 4096), (10, 4096), (12, 4096), (16, 4096)),
    "deepspeech2": ((6, 320), (8, 320), (12, 640)),
    "bert": ((6, 384), (8, 384), (12, 384), (16, 384)),
    "yolov3": ((4, 64),),
    "imagenet": ((10, 1600), (12, 3200), (14, 3200)),
}


@dataclass(frozen=True, slots=True)
class TraceJob:
    t: float
    num_gpus: int
    gpu_time: float


def _number(path: Path, lineno: int, row: dict[str, str], column: str) -> float:
    try:
        value = float(row[column])
    except ValueError:
        raise SimInputError(f'{path}:{lineno}: column "{column}": not a number: "{row[column]}"') from None
    if not math.isfinite(value) or value <= 0:
        raise SimInputError(f'{path}:{lineno}: column "{column}": must be positive, got "{row[column]}"')
    return value


def read_trace(path: Path | str) -> list[TraceJob]:
    path = Path(path)
    out = []
    for lineno, row in read_rows(path, str(path), ("timestamp", "num_gpus", "gpu_time"), what="trace"):
        # every bad row is an error naming its line, as in a workload: rows of 0 or NaN GPUs were
        # dropped without a word, and 1.5 GPUs became 1
        try:
            stamp = datetime.fromisoformat(row["timestamp"])
        except ValueError:
            raise SimInputError(f'{path}:{lineno}: column "timestamp": not a date and time: '
                                f'"{row["timestamp"]}" (e.g. 2017-10-09 07:01:55)') from None
        t = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()  # an offset given is kept
        gpus, gpu_time = _number(path, lineno, row, "num_gpus"), _number(path, lineno, row, "gpu_time")
        if gpus != int(gpus) or gpus > 65_536:
            raise SimInputError(f'{path}:{lineno}: column "num_gpus": {row["num_gpus"]} is not a whole number of '
                                "GPUs (1 to 65536)")
        out.append(TraceJob(t, int(gpus), gpu_time))
    if not out:
        raise SimInputError(f"{path}:2: no jobs after the header")
    out.sort(key=lambda j: j.t)
    return out


def _window(trace: list[TraceJob], jobs: int, hours: float, rng: random.Random) -> list[TraceJob]:
    """A seeded choice among every window starting at a submission that holds ``jobs`` jobs.

    Every start is scanned, not a few random ones: in a trace with long gaps a handful of random
    starts can all miss the busy hours and report an empty window although many would do.
    """
    span = hours * 3600.0
    times = [j.t for j in trace]
    ends = [bisect.bisect_right(times, t + span) for t in times]
    # Equal submit times start the same window; only the first of them counts it whole.
    fits = [a for a, b in enumerate(ends) if b - a >= jobs and (a == 0 or times[a - 1] != times[a])]
    if not fits:
        densest = max(b - a for a, b in enumerate(ends))
        if jobs > len(trace):
            advice = f"ask for at most {densest} jobs (the whole trace holds only {len(trace):,})"
        else:
            needed = min(times[a + jobs - 1] - times[a] for a in range(len(trace) - jobs + 1))
            # Rounded up: the hours printed must be enough.
            advice = f"ask for at most {densest} jobs, or for at least {math.ceil(needed / 36) / 100:.2f} hours"
        raise SimInputError(f"generate: the densest {hours:g} h window of the trace holds {densest} jobs, "
                            f"fewer than --jobs {jobs}; {advice}")
    start = fits[rng.randrange(len(fits))]
    return trace[start:ends[start]]


def generate(trace: list[TraceJob], jobs: int, hours: float, seed: int) -> list[WorkloadJob]:
    if jobs <= 0 or hours <= 0:
        raise SimInputError("generate: --jobs and --hours must be positive")
    rng = random.Random(seed)
    window = _window(trace, jobs, hours, rng)
    picked = sorted(rng.sample(range(len(window)), jobs))
    sample = [window[i] for i in picked]
    order = sorted(range(jobs), key=lambda i: (sample[i].gpu_time, i))
    quantile = {i: (rank + 1) / jobs for rank, i in enumerate(order)}
    t0 = sample[0].t
    out = []
    for i, tj in enumerate(sample):
        models = next(m for bound, m in SIZE_CLASSES if quantile[i] <= bound + 1e-12)
        model = models[rng.randrange(len(models))]
        replicas, bsz = min(CONFIGS[model], key=lambda c: (abs(math.log(c[0] / tj.num_gpus)), c))
        out.append(WorkloadJob(f"{model}-{i}", round(tj.t - t0, 1), model, replicas, bsz))
    return out


def write_workload(jobs: list[WorkloadJob], path: Path | str | None) -> str:
    rows = ["name,time,application,num_replicas,batch_size"]
    rows += [f"{j.name},{j.time},{j.application},{j.num_replicas},{j.batch_size}" for j in jobs]
    text = "\n".join(rows) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
