"""Workload CSVs: which job arrives when, running which model, on how many GPUs.

Columns (by header name, any order): ``name, time, application, num_replicas, batch_size``
as in the Sia artifact's workloads, plus optional ``min_gpus, max_gpus`` for elastic ranges.
Rows must be sorted by ``time``: an unsorted file almost always means a broken export, and
silently sorting it would hide that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from heet_tui.sim.csv_rows import read_rows
from heet_tui.sim.errors import SimInputError

REQUIRED = ("name", "time", "application", "num_replicas", "batch_size")
OPTIONAL = ("min_gpus", "max_gpus")


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One submitted job. ``min_gpus``/``max_gpus`` are ``None`` when the file has no range."""

    name: str
    time: float
    application: str
    num_replicas: int
    batch_size: int
    min_gpus: int | None = None
    max_gpus: int | None = None
    line: int = 0


# beyond these a row is a mistake: a time of 1e300 made a job "train in 0 s" (float rounding)
# and halved the average JCT; a batch of 1e20 overflowed on the way. Times stamped in Unix
# seconds (1.7e9) are taken, as SIMULATOR.md says: up to 1e10 a float still counts microseconds.
MOST = {"time": 1e10, "num_replicas": 65_536, "min_gpus": 65_536, "max_gpus": 65_536, "batch_size": 2 ** 31}


def _positive(where: str, column: str, raw: str, *, integer: bool, allow_zero: bool = False) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SimInputError(f'{where}: column "{column}": not a number: "{raw}"') from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise SimInputError(f'{where}: column "{column}": must be {"0 or more" if allow_zero else "positive"}, '
                            f'got "{raw}"')
    if value > MOST.get(column, math.inf):
        raise SimInputError(f'{where}: column "{column}": {raw} is beyond any real workload (at most '
                            f'{MOST[column]:g}{" s, the year 2286 in Unix time" if column == "time" else ""})')
    if integer and value != int(value):
        raise SimInputError(f'{where}: column "{column}": must be a whole number, got "{raw}"')
    return value


def load_workload(path: Path | str) -> tuple[WorkloadJob, ...]:
    path = Path(path)
    jobs: list[WorkloadJob] = []
    names: dict[str, int] = {}
    last_time = -math.inf
    for lineno, row in read_rows(path, str(path), REQUIRED, OPTIONAL, what="workload", exact_width=True):
        where = f"{path}:{lineno}"
        name = row["name"]
        if not name:
            raise SimInputError(f'{where}: column "name" is empty')
        if name in names:
            raise SimInputError(f"{where}: job name {name!r} already used on line {names[name]}")
        names[name] = lineno
        time = _positive(where, "time", row["time"], integer=False, allow_zero=True)
        if time < last_time:
            raise SimInputError(f"{where}: job {name!r} submitted at {time:g} s, before the previous row "
                                f"({last_time:g} s): rows must be sorted by time")
        last_time = time
        app = row["application"]
        if not app:
            raise SimInputError(f'{where}: column "application" is empty')
        replicas = int(_positive(where, "num_replicas", row["num_replicas"], integer=True))
        bsz = int(_positive(where, "batch_size", row["batch_size"], integer=True))
        lo = hi = None
        if row.get("min_gpus"):
            lo = int(_positive(where, "min_gpus", row["min_gpus"], integer=True))
        if row.get("max_gpus"):
            hi = int(_positive(where, "max_gpus", row["max_gpus"], integer=True))
        if lo is not None and hi is not None and lo > hi:
            raise SimInputError(f"{where}: min_gpus {lo} is larger than max_gpus {hi}")
        if not (lo or 1) <= replicas <= (hi or replicas):
            raise SimInputError(f"{where}: num_replicas {replicas} is outside the job's range min_gpus "
                                f"{lo or '-'} .. max_gpus {hi or '-'}: rigid policies run a job at num_replicas")
        jobs.append(WorkloadJob(name, time, app, replicas, bsz, lo, hi, lineno))
    if not jobs:
        raise SimInputError(f"{path}:2: no jobs after the header")
    return tuple(jobs)


def workload_files(path: Path | str) -> tuple[Path, ...]:
    """A single CSV, or every ``*.csv`` of a directory in name order."""
    path = Path(path)
    if path.is_dir():
        files = tuple(sorted(p for p in path.iterdir() if p.suffix.lower() == ".csv" and p.is_file()))
        if not files:
            raise SimInputError(f"{path}: no *.csv workload files in this directory")
        return files
    if not path.exists():
        raise SimInputError(f"{path}: no such workload file or directory")
    return (path,)
