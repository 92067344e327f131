"""Hosts screen: the hosts TOML as a table; add/edit/remove through a validated form, comments kept.

Every change is validated by the hosts-file checks and saved at once through the comment-
preserving editor; "open in $EDITOR" suspends the app and re-validates the file afterwards.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_edit import HostsDocument
from heet_tui.config.hosts_file import HostEntry, editable_hosts_path
from heet_tui.config.ssh_aliases import ssh_aliases
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.screens.host_fields import as_text, changed_keys, unused_by_local, value_at
from heet_tui.ui.widgets.keyed_table import Cells, KeyedTable
from heet_tui.ui.widgets.screen_footer import ScreenFooter
from heet_tui.ui.widgets.status_line import StatusLine

COLUMNS = (("name", "Name"), ("state", "State"), ("address", "Address"), ("transport", "Transport"), ("user", "User"),
           ("port", "Port"), ("gpus", "GPUs"), ("rack", "Rack"), ("tags", "Tags"), ("line", "Line"))
CHANGING = frozenset({"add_host", "edit_host", "remove_host", "open_editor"})


def entry_row(h: HostEntry, state: str = "") -> Cells:
    """``state``: the controller's word for the host ("" before it has one): a host added with a
    wrong port showed nothing wrong here, only on the Cluster screen."""
    if h.emulate is not None:
        gpus = Text(f"{h.emulate.count}x{h.emulate.gpu_type} emulated, speed {h.emulate.speed:g}", style="italic")
    else:
        which = "all" if h.gpus is None else ",".join(map(str, h.gpus))
        gpus = Text(f"{h.gpu_type or 'from NVML'} [{which}]")
    ssh = h.transport == "ssh"  # a local host has no address, port or login to show
    shown = Text(state or "-", style="" if state in ("ready", "") else "bold red")
    return (h.name, shown, h.address if ssh else "-", h.transport, (h.user or "-") if ssh else "-",
            str(h.port) if ssh and h.port else "-", gpus, h.rack or "-",
            ",".join(h.tags) or "-", str(h.line or "-"))


class HostsScreen(SnapshotScreen):
    DEFAULT_CSS = """
    HostsScreen #hosts-path { height: auto; padding: 0 1; }
    HostsScreen #hosts-problem { height: auto; color: $error; padding: 0 1; }
    HostsScreen #host-why { height: auto; max-height: 4; color: $warning; padding: 0 1; }
    """
    FOOTER_OPTIONAL = ("reload", "open_editor")  # in the help; left out where every key would not fit
    BINDINGS = [
        Binding("n", "add_host", "Add"),
        Binding("e", "edit_host", "Edit"),
        Binding("delete,x", "remove_host", "Remove"),
        Binding("o", "open_editor", "$EDITOR"),
        Binding("ctrl+r", "reload", "Reload"),
    ]

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        self.path = path
        self.document: HostsDocument | None = None
        self.problem = ""
        self._mode_shown: str | None = None
        self._states_shown: dict[str, str] = {}  # the host states the table shows
        self._read: tuple[int, int] | None = None  # the file's (mtime, size) when last read

    def compose(self) -> ComposeResult:
        yield StatusLine("Hosts")
        yield Static(id="hosts-path", markup=False)
        yield Static(id="hosts-problem", markup=False)
        yield KeyedTable(COLUMNS, id="host-entries")
        yield Static(id="host-why", markup=False)
        yield ScreenFooter()

    def on_mount(self) -> None:
        if self.path is None:
            self.path = getattr(self.app, "hosts_path", None)
        self.action_reload()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#host-entries", KeyedTable)

    def action_reload(self, toast: bool = True) -> None:
        """(Re)read the file; a broken file keeps the last good table and says what is wrong, where."""
        if self.path is None:
            self._show_problem("no hosts file given (use --hosts FILE)")
            return
        self._read = _stamp(self.path)
        try:
            self.document = HostsDocument.load(self.path)
        except ConfigError as exc:
            self.document = None
            self._show_problem(str(exc), toast)
            return
        self._show_problem("")
        self._refresh_table()
        if (start := getattr(self.app, "start_controller_again", None)) is not None:
            start(force=True)  # the file that kept the controller from starting reads well now

    def render_snapshot(self, snap: Snapshot) -> None:
        if snap.mode != self._mode_shown:  # only a change of backend changes the line
            self._show_path()
        # Changed outside the app (an editor in another shell): the ✗ line and the table showed
        # the file as it was until ctrl+r. The controller's own toast says it too: no second one.
        if self.path is not None and _stamp(self.path) != self._read:
            self.action_reload(toast=False)
        elif self._states() != self._states_shown:
            self._refresh_table()
        self._show_why()

    def _show_why(self) -> None:
        """The selected host's trouble, on the screen where it is fixed (Cluster's only, before)."""
        key = self.table.selected_key
        host = next((h for h in (self.latest.hosts if self.latest else ()) if h.name == key), None)
        said = f"{host.name}: {host.state.value}: {host.message}" if host and host.state.value != "ready" else ""
        why = self.query_one("#host-why", Static)
        why.update(said)
        why.display = bool(said)

    def _show_path(self) -> None:
        self._mode_shown = self.latest.mode if self.latest is not None else None
        line = Text(f"hosts file: {self.path}", style="bold")
        if self._mode_shown == "demo":
            line.append("  (the demo runs on a simulated cluster; `heet-tui` without --demo uses this file)",
                        style="dim")
        self.query_one("#hosts-path", Static).update(line)

    def _show_problem(self, problem: str, toast: bool = True) -> None:
        self.problem = problem
        self._show_path()
        self.query_one("#hosts-problem", Static).update(problem and f"✗ {problem}")
        self.refresh_bindings()
        if problem and toast:
            self.notify(problem, title="hosts file", severity="error", timeout=8)

    def _states(self) -> dict[str, str]:
        """Each host's state as the Cluster screen and `status` say it: a drained host read plain
        "ready" here."""
        if self.latest is None:
            return {}
        return {h.name: h.state.value + (" (drained)" if h.drained else "") for h in self.latest.hosts}

    def _refresh_table(self) -> None:
        self._states_shown = states = self._states()
        if self.document is not None:
            hosts = self.document.validated.hosts
            # the file's order, always: a host removed and restored (cp hosts.toml.bak) came back at the
            # bottom, and Down then selected another host than the file's next one
            place = {h.name: i for i, h in enumerate(hosts)}
            self.table.order_by(lambda key: place.get(key, len(place)))
            self.table.sync({h.name: entry_row(h, states.get(h.name, "")) for h in hosts})
        self.refresh_bindings()

    def on_keyed_table_row_selected(self, _: KeyedTable.RowSelected) -> None:
        if self.check_action("edit_host", ()):
            self.action_edit_host()

    def on_keyed_table_row_highlighted(self, _: KeyedTable.RowHighlighted) -> None:
        self.refresh_bindings()
        self._show_why()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHANGING:
            if getattr(self.app, "read_only", False):  # the file is edited without a controller too
                return False
            if action == "open_editor":
                return True
            if self.document is None:
                return False
            if action in ("edit_host", "remove_host") and self.table.selected_key is None:
                return False
        return True

    def _shared_default(self) -> bool:
        return self.document.validated.defaults.shared_fs if self.document is not None else True

    def _inherited(self) -> dict[str, str]:
        """[defaults]' values, which a host without its own takes (shown in the form's empty fields)."""
        if self.document is None:
            return {}
        d = self.document.validated.defaults
        return {k: str(v) for k, v in (("user", d.user), ("port", d.port), ("jump", d.jump), ("python", d.python),
                                       ("workdir", d.workdir if d.workdir != "~/.heet" else None)) if v}

    def raw_host(self, name: str) -> dict[str, Any]:
        """The host's own keys as written (defaults not merged), to fill the form."""
        assert self.document is not None
        data = tomllib.loads(self.document.text())
        return next((dict(h) for h in data.get("hosts", []) if h.get("name") == name), {})

    def _own_file(self) -> str | None:
        """Before the first edit of the bundled config, move to the user's own copy of it
        (``editable_hosts_path``); returns what went wrong, if anything."""
        assert self.path is not None
        try:
            path, copied = editable_hosts_path(self.path)
            if path != self.path:
                self.document = HostsDocument.load(path)
        except (OSError, ConfigError) as exc:  # the user's own file exists, a failed copy, a broken file
            return str(exc)
        if path != self.path:
            self.path = self.app.hosts_path = path  # type: ignore[attr-defined]
            self._show_path()
            if copied:
                self.notify(f"created {path} from the bundled config; heet-tui uses it from now on", timeout=10)
        return None

    def _apply(self, change) -> str | None:
        """Run one edit and save; an invalid edit or a failed save returns the message for the form."""
        problem = self._own_file()
        if problem:
            return problem
        if self.document is None:  # the file broke on disk while the form was open
            self.action_reload(toast=False)
        if self.document is None:
            # "o opens it" typed an o into the form's field: o is the Hosts screen's key, behind the form
            return (f"{self.problem}: fix the file in another window, then save again (this form keeps its input); "
                    "or Esc, then o on the Hosts screen opens it in your editor (this form's input is lost)")
        try:
            change(self.document)
            self.document.save()
            self._read = _stamp(self.path)  # our own write: nothing to read again
        except ConfigError as exc:
            self.action_reload_quietly()
            return str(exc)
        except OSError as exc:
            return f"cannot write {self.path}: {exc.strerror or exc}"
        self._refresh_table()
        return None

    def action_reload_quietly(self) -> None:
        """After a refused edit: start again from the file on disk so memory never drifts from it."""
        if self.path is not None:
            try:
                self.document = HostsDocument.load(self.path)
            except ConfigError:
                pass

    def action_add_host(self) -> None:
        def done(name: str | None) -> None:
            if name:
                self.table.select_key(name)
                self.notify(f"added host {name} to {self.path}")

        # on a file of local hosts only (the bundled config), a new host is local too: as ssh, a newcomer's
        # emulated host was "unreachable: cannot connect to emu:22: Name or service not known"
        hosts = self.document.validated.hosts if self.document is not None else ()
        local = bool(hosts) and all(h.transport == "local" for h in hosts)
        config = self.document.validated.ssh_config if self.document is not None else None
        asked: list[str] = []  # the alias said once: saved again, it is kept local

        def apply(f: dict[str, Any]) -> str | None:
            name = f.get("name")
            if said := unused_by_local(f):
                return said
            if local and f.get("transport") == "local" and name in ssh_aliases(config) and asked != [name]:
                asked[:] = [name]
                return (f'{name} is a host of your ssh config: Transport is "local (this machine)", which runs its '
                        "jobs here; choose ssh to reach it, or save again to keep it local")
            return self._apply(lambda d: d.add_host({k: v for k, v in f.items() if v is not None}))

        self.app.push_screen(HostFormDialog("Add host", apply, transport="local" if local else "ssh",
            shared_default=self._shared_default(), inherited=self._inherited()), done)

    def action_edit_host(self) -> None:
        name = self.table.selected_key
        if name is None or self.document is None:
            return

        def done(saved: str | None) -> None:
            if saved:
                self.table.select_key(saved)
                self.notify(f"saved host {saved}")

        initial, overwrite = self.raw_host(name), {}  # field -> the file's value the user chose to write over
        renaming_said: list[str] = []  # the new name a rename was warned about (saved again: renamed)

        def apply(fields: dict[str, Any]) -> str | None:
            if said := unused_by_local({**initial, **fields}, changed=fields):
                return said
            new_name = fields.get("name")
            if new_name and new_name != name and (jobs := self._jobs_on(name)) and renaming_said != [new_name]:
                # a rename is a new host to the controller: the job there moved to "another" host (the same
                # GPU, a restart), and the machine's GPUs counted twice meanwhile; the Remove dialog said so
                renaming_said[:] = [new_name]
                return (f"{name} runs {', '.join(jobs)}: renamed, it is a new host to the controller, and "
                        f"{'they restart' if len(jobs) > 1 else 'it restarts'} there; save again to rename anyway")
            # a field the form changes that was also changed in the file since the form opened:
            # the form's value went over the hand edit without a word
            if self.document is not None and (name_now := self.raw_host(name)):
                clash = sorted(k for k in changed_keys(fields) if value_at(name_now, k) != value_at(initial, k))
                # asked about the value it has now, not one since changed again by hand
                if any(k not in overwrite or overwrite[k] != value_at(name_now, k) for k in clash):
                    overwrite.update({k: value_at(name_now, k) for k in clash})
                    said = ", ".join(f"{k} (now {as_text(value_at(name_now, k))})" for k in clash)
                    return f"changed in the file since this form opened: {said}; save again to write the form's over it"
            return self._apply(lambda d: d.update_host(name, fields))

        self.app.push_screen(HostFormDialog(f"Edit host {name}", apply, initial,
                                            shared_default=self._shared_default(), inherited=self._inherited()), done)

    def action_remove_host(self) -> None:
        name = self.table.selected_key
        if name is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                problem = self._apply(lambda d: d.remove_host(name))
                if problem:
                    self.notify(problem, title="not removed", severity="error", timeout=8)
                else:
                    self.notify(f"removed host {name}")

        jobs = self._jobs_on(name)
        moving = (f" It runs {', '.join(jobs)}: drained first, {'they move' if len(jobs) > 1 else 'it moves'} off "
                  "at the next plan"
                  f"{'' if self.latest and self.latest.auto_approve else ' you approve'}, then it is dropped."
                  if jobs else "")
        self.app.push_screen(ConfirmDialog(f"Remove host {name} from {self.path}?{moving}", yes="Remove"), answered)

    def _jobs_on(self, name: str) -> list[str]:
        status = next((h for h in self.latest.hosts if h.name == name), None) if self.latest is not None else None
        return sorted({j for _, j in status.gpu_jobs}) if status is not None else []

    def action_open_editor(self) -> None:
        if self.path is None:
            return
        problem = self._own_file()
        if problem:
            self.notify(problem, severity="error", timeout=8)
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            with self.app.suspend():
                subprocess.call([*shlex.split(editor), str(self.path)])
        except Exception as exc:  # no terminal to hand over (headless, some CI); say so instead of crashing
            self.notify(f"cannot open an editor here: {exc}", severity="error")
            return
        self.action_reload()
        if not self.problem:
            self.notify(f"reloaded {self.path.name}: {len(self.document.validated.hosts) if self.document else 0} hosts")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


