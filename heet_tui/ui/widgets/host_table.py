"""Every host as one row: state (stale hosts kept, never dropped), GPU type, per-GPU cells by job."""

from __future__ import annotations

from rich.text import Text

from heet_tui.core.host import HostState
from heet_tui.core.snapshot import HostStatus, Snapshot
from heet_tui.ui.format import duration, job_colour, job_shape
from heet_tui.ui.widgets.keyed_table import Cells, KeyedTable

STALE_AFTER_S = 15.0
COLUMNS = (("host", "Host"), ("group", "Group"), ("state", "State"), ("type", "GPU type"),
           ("gpus", "GPUs (by job)"), ("util", "Util"), ("mem", "Mem"), ("seen", "Seen"))

_STATE_STYLE = {
    HostState.READY: "green", HostState.CONNECTING: "yellow", HostState.UNREACHABLE: "bold red",
    HostState.AUTH_FAILED: "bold red", HostState.HOST_KEY_UNKNOWN: "bold yellow",
    HostState.HOST_KEY_CHANGED: "bold white on red", HostState.AGENT_ERROR: "red",
}


def staleness(host: HostStatus, now: float) -> float | None:
    """Seconds since the host was last heard from, when that is long enough to distrust its figures."""
    if host.last_seen is None:
        return None
    age = now - host.last_seen
    return age if age >= STALE_AFTER_S or host.state is not HostState.READY else None


def gpu_cells(host: HostStatus) -> Text:
    """One cell per GPU, coloured and shaped by the job holding it (``job_shape``: stable, and
    different for every job on one host): by colour alone two jobs on one host (two oranges, or
    two greys under NO_COLOR) read as one. Free GPUs are dim, drained ones crossed, ones that
    processes heet did not start use hatched."""
    owners = dict(host.gpu_jobs)
    shapes: dict[str, str] = {}
    for job in sorted(set(owners.values())):  # by name: a job's shape does not change as others leave
        shapes[job] = job_shape(job, shapes.values())
    text = Text()
    for gpu in host.gpus:
        job = owners.get(gpu.index)
        if job is None and gpu.others:
            text.append("▨", style="bold yellow")
        elif job is None:
            text.append("▢" if not host.drained else "✕", style="dim")
        else:
            text.append(shapes[job], style=job_colour(job))
    return text


def mean_utilisation(host: HostStatus) -> float | None:
    values = [g.utilization for g in host.gpus if g.utilization is not None]
    return sum(values) / len(values) if values else None


def memory_fraction(host: HostStatus) -> float | None:
    used = [(g.memory_used_mb, g.memory_mb) for g in host.gpus if g.memory_used_mb is not None and g.memory_mb]
    return sum(u for u, _ in used) / sum(t for _, t in used) if used else None


def host_row(host: HostStatus, now: float, group_by: str) -> Cells:
    stale = staleness(host, now)
    state = Text(host.state.value + (" (drained)" if host.drained else ""), style=_STATE_STYLE[host.state])
    if stale is not None:
        state.append(f" stale {duration(stale)}", style="bold red")
    util, mem = mean_utilisation(host), memory_fraction(host)
    seen = "-" if host.last_seen is None else duration(max(0.0, now - host.last_seen)) + " ago"
    # a host never reached is grouped by the type the hosts file gives it, not "?"
    group = host.gpu_type or host.declared_type or "?" if group_by == "type" else host.rack or "-"
    # one out of reach shows the type its hosts file declares, dim (NVML has not confirmed it)
    gpu_type = host.gpu_type or (Text(host.declared_type, style="dim") if host.declared_type else "-")
    return (host.name, group, state, gpu_type, gpu_cells(host),
            "-" if util is None else f"{util:3.0f}%", "-" if mem is None else f"{mem * 100:3.0f}%", seen)


def host_matches(host: HostStatus, needle: str, now: float) -> bool:
    """Every word of the filter must appear in the host's name, GPU type, rack, state (with
    "drained" and "stale"), or the ids of the jobs on it."""
    marks = ("drained" if host.drained else "", "stale" if staleness(host, now) is not None else "")
    hay = " ".join((host.name, host.gpu_type or "", host.declared_type or "", host.rack or "", host.state.value, *marks,
                    *(job for _, job in host.gpu_jobs))).lower()
    return all(word in hay for word in needle.lower().split())


class HostTable(KeyedTable):
    """Hosts grouped by GPU type or rack; the group column leads so groups read as blocks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, **kwargs)
        self.group_by = "type"
        self.filter_text = ""
        self._groups: dict[str, str] = {}

    def cells_for(self, key: str, source: tuple[HostStatus, float, str]) -> Cells:
        host, now, group_by = source
        return host_row(host, now, group_by)

    def show(self, snap: Snapshot) -> None:
        rows = {}
        # "seen N s ago" moves with the clock in whole seconds; finer changes need no redraw.
        now = float(int(snap.now))
        for host in snap.hosts:
            if self.filter_text and not host_matches(host, self.filter_text, now):
                continue
            rows[host.name] = (host, now, self.group_by)
            self._groups[host.name] = (host.gpu_type or host.declared_type if self.group_by == "type"
                                       else host.rack) or ""
        self.sync(rows)

    def set_filter(self, text: str, snap: Snapshot | None) -> None:
        self.filter_text = text.strip()
        if snap is not None:
            self.show(snap)

    def regroup(self, group_by: str, snap: Snapshot | None) -> None:
        self.group_by = group_by
        if snap is not None:
            self.show(snap)
        self.order_by(lambda name: (self._groups.get(name, ""), name))
