"""The GPUs a host offers, from its agent's inventory and heartbeats.

Plans know a host by one GPU type and hand out GPUs by index. A host that holds several types
(an A100 box with a V100 added, a GPU whose name the driver would not give) read as the type of
its first GPU, and a job limited to A100s ran on the V100 and the RTX 2080 Ti beside them.
Such a host offers the GPUs of its main type only and says which it leaves out and how to
use them (an entry of their own in the hosts file).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from heet_tui.cluster.gpu_names import short_gpu_type
from heet_tui.cluster.gpu_users import other_processes
from heet_tui.config.hosts_file import MAX_EMULATED_GPUS, HostEntry
from heet_tui.core.gpu import Gpu

# What one agent's inventory may hold: a compromised one sent 400 KB names and warnings, and each
# heartbeat's snapshot carried them to every screen and CLI answer.
MAX_GPUS = MAX_EMULATED_GPUS  # more than any real machine holds
MAX_NAME = 96
MAX_TEXT = 500
MAX_WARNINGS = 20


def read_inventory(entry: HostEntry, inventory: dict[str, Any],
                   notes: Callable[[str], list[str]]) -> tuple[str, tuple[Gpu, ...], list[str]]:
    """``(source, gpus, warnings)`` from an agent's inventory (hello, or listed again);
    ``notes(real_type)``: the hosts file's warnings about the host, given its real GPUs' type."""
    source = str(inventory.get("source", "none"))[:20]
    gpus, left_out = gpus_offered(entry, source, inventory.get("gpus"))
    real_type = gpus[0].gpu_type if gpus and source != "emulated" else ""
    said = _texts(inventory.get("warnings"))
    warnings = said + notes(real_type) + left_out
    if not gpus and not left_out:  # a ready host that can run nothing: say why, or it reads as a healthy empty box
        found = len(inventory.get("gpus") or ())
        why = "; ".join(_texts(inventory.get("notes")))
        warnings.append(
            f"no usable GPUs: the hosts file's gpus = [...] names none of the {found} found" if found else
            f"no usable GPUs{': ' + why if why else ''}; jobs are not placed here (a GPU host needs nvidia-ml-py "
            "for its python, or nvidia-smi on its PATH; emulate = {...} runs training on the CPU instead)")
    return source, gpus, warnings


def gpus_offered(entry: HostEntry, source: str, raw_gpus: Any) -> tuple[tuple[Gpu, ...], list[str]]:
    """The host's usable GPUs and what a user must hear about those left out."""
    allowed = set(entry.gpus) if entry.gpus is not None else None
    found, warnings = [], []
    mig, broken = [], []
    real: dict[int, str] = {}  # index -> the type its name says (the file's gpu_type aside)
    listed = list(raw_gpus or ()) if isinstance(raw_gpus, list) else []
    if len(listed) > MAX_GPUS:  # a compromised agent claimed 7,000, and every plan went there
        warnings.append(f"the agent lists {len(listed)} GPUs: only the first {MAX_GPUS} are used")
    for raw in listed[:MAX_GPUS]:
        if not isinstance(raw, dict):
            continue
        index = _whole(raw.get("index"))
        if index is None or (allowed is not None and index not in allowed):
            continue
        if raw.get("mig") is True:  # CUDA_VISIBLE_DEVICES=<index> would reach one slice at most
            mig.append(index)
            continue
        if raw.get("error"):  # the driver says it is broken: a job there crashes, or hangs
            broken.append(f"gpu{index} ({str(raw['error'])[:MAX_NAME]})")
            continue
        name = str(raw.get("name") or "unknown")[:MAX_NAME]
        real[index] = name if source == "emulated" else short_gpu_type(name)
        if entry.gpu_type and (source in ("emulated", "none") or real[index] in ("unknown", "")
                               or _same_type(real[index], entry.gpu_type)):
            real[index] = entry.gpu_type  # the file's word for what the driver does not name, or names as its kin
        gpu_type = entry.gpu_type or real[index]
        found.append(Gpu(index=index, gpu_type=gpu_type, memory_mb=_whole(raw.get("memory_mb")) or 0,
                         uuid=str(raw.get("uuid") or "")[:MAX_NAME], source=source,
                         utilization=_number(raw.get("utilization")),
                         memory_used_mb=_whole(raw.get("memory_used_mb")), others=other_processes(raw)))
    if mig:
        warnings.append(f"{_gpus(mig)} left out: MIG mode is on (heet-tui hands out whole GPUs; "
                        "nvidia-smi -i N -mig 0 turns it off)")
    if broken:
        warnings.append(f"left out, as nvidia-smi reports: {', '.join(broken)}; see nvidia-smi -q and dmesg (Xid) "
                        "on the host")
    # by the driver's names: a gpu_type in the file named a T4 beside two A100s an A100 too
    types = Counter(real[g.index] for g in found)
    if len(types) > 1:
        first = {t: min(g.index for g in found if real[g.index] == t) for t in types}
        main = min(types, key=lambda t: (-types[t], first[t]))
        kept = [g for g in found if real[g.index] == main]
        left = [g for g in found if real[g.index] != main]
        left_types = sorted({real[g.index] for g in left}, key=lambda t: first[t])
        each = ", ".join(f"{t} (gpus = [{', '.join(str(g.index) for g in left if real[g.index] == t)}])"
                         for t in left_types)
        warnings.append(f"GPUs of {len(types)} types: jobs here run on the {len(kept)}x{main} only "
                        f"({_gpus([g.index for g in kept])}); left out: {each}: give each an entry of its own "
                        "in the hosts file, with the same address and those gpus")
        found = kept
    named = sorted({real[g.index] for g in found if not _same_type(real[g.index], entry.gpu_type or "")})
    if entry.gpu_type and named:  # a copied entry sent A100-only jobs to consumer cards, the real name shown nowhere
        warnings.append(f"gpu_type = \"{entry.gpu_type}\" in the hosts file, but the driver names its GPUs "
                        f"{', '.join(named)}: plans treat them as {entry.gpu_type}")
    return tuple(found), warnings


def with_sample(gpus: tuple[Gpu, ...], sample: Any) -> tuple[Gpu, ...]:
    """The GPUs with a heartbeat's readings. A GPU the agent could not read keeps the processes
    last seen on it: read as "none", someone's notebook there became free to plan onto the moment
    the driver stopped answering."""
    fresh = {i: g for g in sample or () if isinstance(g, dict) and (i := _whole(g.get("index"))) is not None}
    out = []
    for gpu in gpus:
        raw = fresh.get(gpu.index)
        if raw is None:
            out.append(gpu)
        elif raw.get("unread") is True:
            out.append(replace(gpu, utilization=None, memory_used_mb=None))
        else:
            out.append(replace(gpu, utilization=_number(raw.get("utilization")),
                               memory_used_mb=_whole(raw.get("memory_used_mb")), others=other_processes(raw)))
    return tuple(out)


def _texts(value: Any) -> list[str]:
    """An agent's list of messages, held to ``MAX_WARNINGS`` of ``MAX_TEXT`` characters (a string
    in its place is no list of them)."""
    return [t[:MAX_TEXT] for t in value[:MAX_WARNINGS] if isinstance(t, str)] if isinstance(value, list) else []


def _gpus(indices: list[int]) -> str:
    return ("gpu " if len(indices) == 1 else "gpus ") + ",".join(str(i) for i in sorted(indices))


def _number(value: Any) -> float | None:
    """An agent's reading as a number, else None: a string there ("LOTS") went into every snapshot,
    and each attached TUI and ``heet-tui status`` refused the snapshot for it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _whole(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _same_type(named: str, declared: str) -> bool:
    """Whether the driver's short name and the file's gpu_type are one type: "RTX 2080 Ti" is
    RTX2080Ti, and a memory size or form factor after the name ("A100 80GB", "A100-SXM4") is the
    same type; "A10" for A100, "L4" for L40S (a substring test let both through unsaid), "RTX 2080
    Ti" for RTX2080 and "V100S" for V100 are other types."""
    a, b = (re.sub(r"[\s_]+", "-", t.strip().casefold()) for t in (named, declared))
    if not a or not b:
        return False
    if re.sub(r"[^a-z0-9]", "", a) == re.sub(r"[^a-z0-9]", "", b):
        return True
    short, long = sorted((a, b), key=len)
    return long.startswith(short) and re.fullmatch(_SIZE_OR_FORM, long[len(short):]) is not None


_SIZE_OR_FORM = re.compile(r"(?:-?(?:\d+g(?:b)?|pcie|sxm\d*|hbm\d*e?))+", re.IGNORECASE)
