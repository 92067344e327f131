"""The simulated cluster: node types read from a TOML file.

A simulated cluster is a list of node types (GPU type, GPUs per node, how many nodes, and the
profile suffix whose measurements describe that node), which is all the Sia-format profiles
can tell apart. The file format::

    name = "sia-64gpu"

    [[node_types]]
    name = "aws"            # host names become aws-0, aws-1, ...
    profile = "aws"         # profile file suffix (placements-aws.csv); defaults to name
    gpu_type = "T4"
    gpus_per_node = 4
    count = 6
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from heet_tui.config.errors import MAX_CONFIG_BYTES, NESTED_TOO_DEEP, toml_syntax_error
from heet_tui.config.plain_files import read_plain_text
from heet_tui.core.sched_input import ClusterView, HostView
from heet_tui.sim.errors import SimInputError

MAX_GPUS_PER_NODE = 64  # a real node holds 8 or 16
MAX_GPUS = 65_536  # in a whole cluster: 32 times the 2,048 the simulator is built for


@dataclass(frozen=True, slots=True)
class NodeType:
    name: str
    profile: str
    gpu_type: str
    gpus_per_node: int
    count: int


@dataclass(frozen=True, slots=True)
class SimNode:
    name: str
    node_type: str
    gpu_type: str
    gpus: int


@dataclass(frozen=True)
class SimCluster:
    name: str
    node_types: tuple[NodeType, ...]
    source: str = ""

    @property
    def nodes(self) -> tuple[SimNode, ...]:
        return tuple(
            SimNode(f"{t.name}-{i}", t.name, t.gpu_type, t.gpus_per_node)
            for t in self.node_types
            for i in range(t.count)
        )

    @property
    def total_gpus(self) -> int:
        return sum(t.gpus_per_node * t.count for t in self.node_types)

    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({t.gpu_type for t in self.node_types}))

    def gpus_of_type(self, gpu_type: str) -> int:
        return sum(t.gpus_per_node * t.count for t in self.node_types if t.gpu_type == gpu_type)

    def profile_map(self) -> dict[str, str]:
        """Profile suffix -> GPU type, the mapping the profile reader takes."""
        return {t.profile: t.gpu_type for t in self.node_types}

    def empty_view(self) -> ClusterView:
        return ClusterView(tuple(
            HostView(n.name, n.gpu_type, n.gpus, tuple(range(n.gpus)), rack=n.node_type) for n in self.nodes
        ))

    def scaled(self, factor: int) -> SimCluster:
        """The same mix of node types with ``factor`` times as many nodes of each."""
        if factor < 1:
            raise ValueError("cluster scale must be a positive integer")
        if self.total_gpus * factor > MAX_GPUS:
            raise ValueError(f"cluster scale {factor} makes {self.total_gpus * factor:,} GPUs, more than the simulator "
                             f"takes (at most {MAX_GPUS:,})")
        types = tuple(NodeType(t.name, t.profile, t.gpu_type, t.gpus_per_node, t.count * factor)
                      for t in self.node_types)
        return SimCluster(f"{self.name}x{factor}" if factor > 1 else self.name, types, self.source)

    @staticmethod
    def of(name: str, *types: tuple[str, str, int, int]) -> SimCluster:
        """Build a cluster in code: ``SimCluster.of("x", ("aws", "T4", 4, 6))``."""
        return SimCluster(name, tuple(NodeType(n, n, g, k, c) for n, g, k, c in types))


def _line_of(text: str, needle: str, occurrence: int) -> int:
    seen = 0
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(needle):
            if seen == occurrence:
                return i
            seen += 1
    return 1


def _top_line(text: str, key: str) -> int:
    """The line that sets top-level ``key`` (1 when not found)."""
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith("["):
            break
        if line.split("=")[0].strip() == key:
            return n
    return 1


def _key_line(text: str, table: int, key: str) -> int:
    """The line of ``key`` in the ``table``-th [[node_types]] (its header's when not found): an
    error in "count" on line 6 was reported on line 1."""
    start = _line_of(text, "[[node_types]]", table)
    for i, line in enumerate(text.splitlines()[start:], start=start + 1):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if stripped.startswith(key) and stripped[len(key):].lstrip().startswith("="):
            return i
    return start


def load_cluster(path: Path | str) -> SimCluster:
    """Read a cluster TOML; every problem is a :class:`SimInputError` naming file and line."""
    path = Path(path)
    try:
        # 100 MB took 3.6 s and 300 MB to read, /dev/zero until memory ran out; a byte-order mark first (a
        # Windows editor) is no error
        text = read_plain_text(path, MAX_CONFIG_BYTES, "a cluster file", encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SimInputError(f"{path}: not valid UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})") \
            from None
    except OSError as exc:
        raise SimInputError(f"{path}: cannot read cluster file: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        said = toml_syntax_error(path, exc)  # "file:line: ...", as every other input error
        raise SimInputError(f"{path}{f':{said.line}' if said.line else ''}: {said.detail}") from None
    except RecursionError:
        raise SimInputError(f"{path}: {NESTED_TOO_DEEP}") from None
    if unknown := sorted(set(data) - {"name", "node_types"}):  # a typo at the top ("node_type") went unsaid
        raise SimInputError(f"{path}:{_top_line(text, unknown[0])}: unknown key(s) {', '.join(unknown)} "
                            "(known: name, node_types)")
    raw_types = data.get("node_types")
    if not isinstance(raw_types, list) or not raw_types:
        raise SimInputError(f"{path}:1: no [[node_types]] tables (each needs gpu_type, gpus_per_node, count)")
    types: list[NodeType] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_types):
        where = f"{path}:{_line_of(text, '[[node_types]]', i)}: node type #{i + 1}"
        if not isinstance(raw, dict):
            raise SimInputError(f"{where}: must be a table")
        unknown = sorted(set(raw) - {"name", "profile", "gpu_type", "gpus_per_node", "count"})
        if unknown:
            raise SimInputError(f"{path}:{_key_line(text, i, unknown[0])}: node type #{i + 1}: unknown key(s) "
                                f"{', '.join(unknown)} (known: name, profile, gpu_type, gpus_per_node, count)")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise SimInputError(f'{where}: "name" must be a non-empty string')
        where = f"{path}:{_line_of(text, '[[node_types]]', i)}: node type {name!r}"
        if name in seen:
            raise SimInputError(f"{where}: duplicate name")
        seen.add(name)
        gpu_type = raw.get("gpu_type")
        if not isinstance(gpu_type, str) or not gpu_type:
            raise SimInputError(f'{where}: "gpu_type" must be a non-empty string')
        profile = raw.get("profile", name)
        if not isinstance(profile, str) or not profile:
            raise SimInputError(f'{where}: "profile" must be a non-empty string')
        ints = {}
        for key, most in (("gpus_per_node", MAX_GPUS_PER_NODE), ("count", MAX_GPUS)):
            value = raw.get(key)
            at = f"{path}:{_key_line(text, i, key)}: node type {name!r}" if key in raw else where
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise SimInputError(f'{at}: "{key}" must be a positive integer, got {value!r}')
            if value > most:  # 10**20 was a traceback, and a billion nodes ran for ever
                raise SimInputError(f'{at}: "{key}" {value} is more than the simulator takes (at most {most})')
            ints[key] = value
        twin = next((t for t in types if t.gpu_type == gpu_type and t.profile != profile), None)
        if twin is not None:  # profiles and throughput are keyed by GPU type; one profile in two sizes is fine
            raise SimInputError(f"{path}:{_key_line(text, i, 'gpu_type')}: node type {name!r}: {gpu_type!r} "
                                f"is also the GPU type of node type {twin.name!r}, profiled as {twin.profile!r}; the "
                                f"simulator keys speed by GPU type, so give each its own (e.g. "
                                f"{gpu_type + '-' + name!r}), or both the same profile (nodes of one GPU in two sizes)")
        types.append(NodeType(name, profile, gpu_type, ints["gpus_per_node"], ints["count"]))
    for t in types:
        clash = [u for u in types if u.profile == t.profile and u.gpu_type != t.gpu_type]
        if clash:
            raise SimInputError(f"{path}: node types {t.name!r} and {clash[0].name!r} share profile "
                                f"{t.profile!r} but name different GPU types ({t.gpu_type!r}, {clash[0].gpu_type!r}): "
                                "nodes of one GPU in two sizes are node types of the same gpu_type and profile")
    total = sum(t.gpus_per_node * t.count for t in types)
    if total > MAX_GPUS:
        raise SimInputError(f"{path}: {total:,} GPUs in all, more than the simulator takes (at most {MAX_GPUS:,})")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise SimInputError(f'{path}:{_top_line(text, "name")}: "name" must be a non-empty string, got {name!r}')
    return SimCluster(name, tuple(types), str(path))
