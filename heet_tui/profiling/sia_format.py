"""Reader of the Sia artifact's profile directory format.

Sia (SOSP 2023) and Pollux before it published measured step times of real training jobs on
real GPU types. Reading them lets heet start with a populated throughput tensor and lets the
benchmarks compare predictions against measurements nobody here made. The layout is one folder
per model holding ``placements-<node>.csv`` and ``scalability-<node>.csv`` (columns named by
the header, in an order that differs between files). ``validation-*.csv`` files (statistical
efficiency) are left to the simulator.

Every problem with a file is a :class:`ProfileFormatError` naming the file and the line, so a
user pointing heet at a broken directory sees what to fix rather than a traceback.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_NODE_TYPES: dict[str, str] = {"aws": "T4", "rtx": "RTX2080Ti", "dgx-ext": "A100"}

# How far beyond the profiled local batch sizes a step time may be extrapolated, as a fraction
# of the nearest profiled size. Step time is close to linear in local batch near the ends of the
# profiled range, but far outside it memory limits and kernel changes make a line meaningless.
EXTRAPOLATION_MARGIN = 0.15

PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")


class ProfileFormatError(ValueError):
    """A profile file that cannot be read; the message starts with ``file:line:``."""


Placement = tuple[int, ...]

MAX_REPEAT_RATIO = 3.0  # repeated measurements further apart than this are a mistake, not noise


@dataclass(frozen=True, slots=True)
class PlacementRow:
    """One measurement at an explicit placement (GPUs per node, largest first)."""

    placement: Placement
    local_bsz: int
    step_time: float
    sync_time: float


@dataclass(frozen=True, slots=True)
class ScalabilityRow:
    """One measurement at an evenly spread placement of ``num_replicas`` over ``num_nodes``."""

    num_nodes: int
    num_replicas: int
    local_bsz: int
    step_time: float
    sync_time: float


def even_placement(num_nodes: int, num_replicas: int) -> Placement:
    """The most even spread of ``num_replicas`` GPUs over ``num_nodes`` nodes, largest first."""
    if num_nodes <= 0 or num_replicas < num_nodes:
        raise ValueError(f"cannot spread {num_replicas} GPUs over {num_nodes} nodes")
    base, extra = divmod(num_replicas, num_nodes)
    return tuple([base + 1] * extra + [base] * (num_nodes - extra))


def _is_even(placement: Placement) -> bool:
    return bool(placement) and max(placement) - min(placement) <= 1


@dataclass(frozen=True, slots=True)
class _Curve:
    """Step time against local batch size for one placement, duplicates averaged."""

    bsz: tuple[float, ...]
    step: tuple[float, ...]

    @staticmethod
    def build(points: Iterable[tuple[float, float]]) -> _Curve:
        sums: dict[float, list[float]] = {}
        for b, s in points:
            sums.setdefault(float(b), []).append(s)
        keys = sorted(sums)
        return _Curve(tuple(keys), tuple(sum(sums[k]) / len(sums[k]) for k in keys))

    def at(self, local_bsz: float) -> float | None:
        lo, hi = self.bsz[0], self.bsz[-1]
        if local_bsz < lo * (1 - EXTRAPOLATION_MARGIN) or local_bsz > hi * (1 + EXTRAPOLATION_MARGIN):
            return None
        if len(self.bsz) == 1:
            return self.step[0]
        i = bisect.bisect_left(self.bsz, local_bsz)
        i = min(max(i, 1), len(self.bsz) - 1)
        b0, b1, s0, s1 = self.bsz[i - 1], self.bsz[i], self.step[i - 1], self.step[i]
        value = s0 + (s1 - s0) * (local_bsz - b0) / (b1 - b0)
        # A line extrapolated below the range can reach zero; a step never takes less than
        # half the fastest profiled step.
        return max(value, 0.5 * min(self.step))


@dataclass(frozen=True)
class NodeProfile:
    """All measurements of one model on one node type (one GPU type)."""

    node_type: str
    gpu_type: str
    placement_rows: tuple[PlacementRow, ...]
    scalability_rows: tuple[ScalabilityRow, ...]
    _exact: dict[Placement, _Curve] = field(init=False, repr=False, compare=False)
    _even: dict[tuple[int, int], _Curve] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact: dict[Placement, list[tuple[float, float]]] = {}
        for r in self.placement_rows:
            exact.setdefault(r.placement, []).append((r.local_bsz, r.step_time))
        even: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for s in self.scalability_rows:
            even.setdefault((s.num_nodes, s.num_replicas), []).append((s.local_bsz, s.step_time))
        object.__setattr__(self, "_exact", {p: _Curve.build(v) for p, v in exact.items()})
        object.__setattr__(self, "_even", {p: _Curve.build(v) for p, v in even.items()})

    # ``placements()`` lists configurations, so the raw rows live under ``placement_rows`` and
    # ``scalability_rows``; ``scalability`` is a read-only alias for symmetry with the file names.
    @property
    def scalability(self) -> tuple[ScalabilityRow, ...]:
        return self.scalability_rows

    def step_time(self, placement: Placement, local_bsz: float) -> float | None:
        """Seconds per step at ``placement`` with ``local_bsz`` samples per GPU, or None.

        Explicit placement rows win; an evenly spread placement falls back to the scalability
        rows; anything else (or a batch size too far outside the profiled range) is unknown.
        """
        key = tuple(sorted((int(c) for c in placement if c > 0), reverse=True))
        if not key:
            return None
        curve = self._exact.get(key)
        if curve is not None:
            value = curve.at(local_bsz)
            if value is not None:
                return value
        if _is_even(key):
            curve = self._even.get((len(key), sum(key)))
            if curve is not None:
                return curve.at(local_bsz)
        return None

    def throughput(self, placement: Placement, global_bsz: float) -> float | None:
        """Samples/s at ``global_bsz`` split evenly over the placement's GPUs, or None."""
        k = sum(placement)
        if k <= 0 or global_bsz <= 0:
            return None
        step = self.step_time(placement, global_bsz / k)
        if step is None or step <= 0:
            return None
        return global_bsz / step

    def placements(self) -> tuple[Placement, ...]:
        """Every profiled configuration, by GPU count, then host count, then shape."""
        found = set(self._exact)
        for nodes, replicas in self._even:
            if replicas >= nodes > 0:
                found.add(even_placement(nodes, replicas))
        return tuple(sorted(found, key=lambda p: (sum(p), len(p), tuple(-c for c in p))))

    def local_bsz_range(self, placement: Placement) -> tuple[float, float] | None:
        """Smallest and largest profiled local batch at a placement (either source), or None."""
        key = tuple(sorted(placement, reverse=True))
        curves = [c for c in (self._exact.get(key), self._even.get((len(key), sum(key))) if _is_even(key)
                  else None) if c is not None]
        if not curves:
            return None
        return min(c.bsz[0] for c in curves), max(c.bsz[-1] for c in curves)

    @property
    def max_local_bsz(self) -> int:
        """Largest local batch profiled anywhere on this node type (0 if nothing profiled)."""
        sizes = [r.local_bsz for r in self.placement_rows] + [r.local_bsz for r in self.scalability_rows]
        return max(sizes, default=0)

    @property
    def gpus_per_node(self) -> int:
        """Largest per-node GPU count seen in the profiles (a lower bound on the node size)."""
        counts = [max(p) for p in self._exact]
        counts += [math.ceil(r / n) for n, r in self._even if n > 0]
        return max(counts, default=0)


@dataclass(frozen=True)
class ModelProfile:
    """One model (application) measured on one or more GPU types."""

    model: str
    by_type: dict[str, NodeProfile]

    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted(self.by_type))

    def throughput_function(self, global_bsz: float) -> Callable[[str, tuple[int, ...]], float]:
        """The measured ``(gpu_type, placement) -> samples/s`` at one global batch (0 = not profiled),
        the shape of ``heet_tui.core.sched_input.ThroughputFn``: an oracle for simulators."""

        def throughput(gpu_type: str, placement: tuple[int, ...]) -> float:
            node = self.by_type.get(gpu_type)
            value = node.throughput(tuple(placement), global_bsz) if node is not None and placement else None
            return float(value) if value is not None else 0.0

        return throughput


def _open_rows(path: Path, label: str, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    if path.exists() and not path.is_file():  # /dev/zero read until memory ran out; a named pipe hung
        raise ProfileFormatError(f"{label}: not a regular file (a pipe, device or directory?)")
    try:
        text = path.read_text(encoding="utf-8-sig")  # "-sig": a byte-order mark (Excel) is not the header
    except UnicodeDecodeError as exc:  # the byte's line, as the workload reader says it
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ProfileFormatError(f"{label}:{line}: not valid UTF-8 (byte {exc.object[exc.start]:#04x}); save it as "
                                 "UTF-8") from None
    except OSError as exc:
        raise ProfileFormatError(f"{label}: cannot read: {exc.strerror or exc}") from None
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise ProfileFormatError(f"{label}:1: empty file (expected a header: {', '.join(required)})")
    reader = csv.reader(lines)
    try:
        return _rows(reader, label, required)
    except csv.Error as exc:  # a field over csv's limit (128 KiB) was a traceback
        raise ProfileFormatError(f"{label}:{max(1, reader.line_num)}: {exc}") from None


def _rows(reader, label: str, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    header = [h.strip() for h in next(reader)]
    missing = [c for c in required if c not in header]
    if missing:
        names = ", ".join(f'"{c}"' for c in missing)
        raise ProfileFormatError(f"{label}:1: missing column{'s' if len(missing) > 1 else ''} {names}"
                                 f" (header has: {', '.join(header)})")
    index = {c: header.index(c) for c in required}
    rows: list[tuple[int, dict[str, str]]] = []
    for lineno, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise ProfileFormatError(f"{label}:{lineno}: {len(cells)} fields, header has {len(header)}")
        rows.append((lineno, {c: cells[i].strip() for c, i in index.items()}))
    if not rows:
        raise ProfileFormatError(f"{label}:2: no data rows after the header")
    return rows


def _number(label: str, lineno: int, column: str, raw: str, *, integer: bool = False,
            allow_zero: bool = False) -> float:
    where = f'{label}:{lineno}: column "{column}"'
    try:
        value = float(raw)
    except ValueError:
        raise ProfileFormatError(f'{where}: not a number: "{raw}"') from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ProfileFormatError(f'{where}: must be a positive number, got "{raw}"')
    if integer and value != int(value):
        raise ProfileFormatError(f'{where}: must be a whole number, got "{raw}"')
    return value


def _placement(label: str, lineno: int, raw: str) -> Placement:
    text = raw.strip()
    parts = text.split("-") if "-" in text else list(text)
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ProfileFormatError(f'{label}:{lineno}: column "placement": not a placement '
                                 f'(digits 1-9, one per node): "{raw}"')
    return tuple(sorted((int(p) for p in parts), reverse=True))


def read_placements(path: Path, label: str | None = None) -> tuple[PlacementRow, ...]:
    label = label or path.name
    out, seen = [], {}
    for lineno, r in _open_rows(path, label, PLACEMENT_COLUMNS):
        row = PlacementRow(
            placement=_placement(label, lineno, r["placement"]),
            local_bsz=int(_number(label, lineno, "local_bsz", r["local_bsz"], integer=True)),
            step_time=_number(label, lineno, "step_time", r["step_time"]),
            sync_time=_number(label, lineno, "sync_time", r["sync_time"], allow_zero=True),
        )
        _same_twice(label, lineno, seen, (row.placement, row.local_bsz), row.step_time,
                    f"placement {r['placement'].strip()}, local_bsz {row.local_bsz}")
        out.append(row)
    return tuple(out)


def _same_twice(label: str, lineno: int, seen: dict, key: object, step: float, what: str) -> None:
    """A measurement repeated is averaged, unless two of them are too far apart to be one quantity:
    a row appended with a 10x step time made a job's JCT 1.03 h -> 5.52 h without a word. Each
    repeat is held against the smallest and the largest seen so far (two repeats 8x apart, both
    within 3x of the first row, were averaged)."""
    low, high = seen.get(key, ((lineno, step), (lineno, step)))
    for first, before in (low, high):
        if max(step, before) > MAX_REPEAT_RATIO * min(step, before):
            raise ProfileFormatError(f"{label}:{lineno}: {what} is measured again with step_time {step:g}, "
                                     f"{max(step, before) / min(step, before):.1f}x line {first}'s {before:g}: "
                                     "remove the wrong row (repeats within "
                                     f"{MAX_REPEAT_RATIO:g}x of each other are averaged)")
    seen[key] = (min(low, (lineno, step), key=lambda x: x[1]), max(high, (lineno, step), key=lambda x: x[1]))


def read_scalability(path: Path, label: str | None = None) -> tuple[ScalabilityRow, ...]:
    label = label or path.name
    out, seen = [], {}
    for lineno, r in _open_rows(path, label, SCALABILITY_COLUMNS):
        nodes = int(_number(label, lineno, "num_nodes", r["num_nodes"], integer=True))
        replicas = int(_number(label, lineno, "num_replicas", r["num_replicas"], integer=True))
        if replicas < nodes:
            raise ProfileFormatError(f'{label}:{lineno}: column "num_replicas": {replicas} GPUs cannot '
                                     f"spread over {nodes} nodes")
        row = ScalabilityRow(
            num_nodes=nodes, num_replicas=replicas,
            local_bsz=int(_number(label, lineno, "local_bsz", r["local_bsz"], integer=True)),
            step_time=_number(label, lineno, "step_time", r["step_time"]),
            sync_time=_number(label, lineno, "sync_time", r["sync_time"], allow_zero=True),
        )
        _same_twice(label, lineno, seen, (nodes, replicas, row.local_bsz), row.step_time,
                    f"{replicas} GPUs on {nodes} nodes, local_bsz {row.local_bsz}")
        out.append(row)
    return tuple(out)


def node_types_in(folder: Path) -> list[str]:
    """The node-type suffixes ``folder`` has placements or scalability files for."""
    found = set()
    for kind in ("placements", "scalability"):
        for p in folder.glob(f"{kind}-*.csv"):
            found.add(p.stem[len(kind) + 1:])
    return sorted(found)


def read_model(folder: Path, node_types: Mapping[str, str] | None = None,
               label_prefix: str = "") -> ModelProfile:
    """Read one model folder; node types missing from an explicit mapping are skipped."""
    by_type: dict[str, NodeProfile] = {}
    for node in node_types_in(folder):
        if node_types is not None and node not in node_types:
            continue
        gpu_type = node_types[node] if node_types is not None else DEFAULT_NODE_TYPES.get(node, node)
        placements_path = folder / f"placements-{node}.csv"
        scalability_path = folder / f"scalability-{node}.csv"
        placements = (read_placements(placements_path, f"{label_prefix}{placements_path.name}")
                      if placements_path.exists() else ())
        scalability = (read_scalability(scalability_path, f"{label_prefix}{scalability_path.name}")
                       if scalability_path.exists() else ())
        if gpu_type in by_type:
            raise ProfileFormatError(f"{label_prefix}placements-{node}.csv: node type {node!r} maps to "
                                     f"GPU type {gpu_type!r}, which another node type already uses")
        by_type[gpu_type] = NodeProfile(node, gpu_type, placements, scalability)
    return ModelProfile(folder.name, by_type)


def read_profiles(root: Path, node_types: Mapping[str, str] | None = None) -> dict[str, ModelProfile]:
    """Every model under ``root`` keyed by folder name (``root`` may itself be one model folder).

    ``node_types`` maps a file suffix (``aws``) to a GPU type name (``T4``); with a mapping,
    unmapped node types are skipped; without one the known Sia names are used and any other
    suffix becomes its own GPU type name. Models with no readable node type are left out.
    """
    root = Path(root)
    if not root.is_dir():
        raise ProfileFormatError(f"{root}: not a directory of profiles")
    if node_types_in(root):
        folders = [root]
    else:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and node_types_in(p))
    if not folders:
        raise ProfileFormatError(f"{root}: no placements-<node>.csv or scalability-<node>.csv files found")
    out: dict[str, ModelProfile] = {}
    for folder in folders:
        prefix = "" if folder == root else f"{folder.name}/"
        model = read_model(folder, node_types, label_prefix=prefix)
        if model.by_type:
            out[model.model] = model
    return out
