"""The command palette's actions (commands.py lists them): each asks for one value (a job spec,
a host, a policy), then posts the intent it names. Mixed into the app, whose ``latest``,
``post_intent``, ``push_screen`` and ``notify`` they use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from heet_tui.config.job_spec import spec_file
from heet_tui.core.intents import ConnectHost, DrainHost, SetAutoApprove, SetPolicy, SubmitJob, UpdateJobs
from heet_tui.core.snapshot import HostStatus
from heet_tui.ui.commands import example_job_specs
from heet_tui.ui.dialogs.drain import drain_asking_first
from heet_tui.ui.dialogs.prompt import PromptDialog


class PaletteActions:
    """Mixed into the app: the palette's commands that ask for a value first."""

    def _hosts(self) -> dict[str, HostStatus]:
        return {h.name: h for h in self.latest.hosts} if self.latest else {}  # type: ignore[attr-defined]

    def _host_names(self) -> list[str]:
        return list(self._hosts())

    def _prompt(self, question: str, suggestions: list[str], answered: Callable[[str], None], value: str = "",
                paths: bool = False) -> None:
        """Asks ``question``; ``answered`` gets what was typed (nothing happens on Escape or an empty line)."""
        def typed(value: str | None) -> None:
            if value:
                answered(value)

        self.push_screen(PromptDialog(question, suggestions, value, paths), typed)  # type: ignore[attr-defined]

    def _post_typed(self, make: Callable[[str], tuple[object, str]]) -> Callable[[str], None]:
        """An answer posted as the intent ``make`` builds from it, with its description."""
        return lambda value: self.post_intent(*make(value))  # type: ignore[attr-defined]

    def submit_job_file(self, path: str) -> None:
        self.post_intent(SubmitJob(spec_file(path)), f"submit {Path(path).name}")  # type: ignore[attr-defined]

    def action_submit_job(self) -> None:
        # spec_file: a path typed here is relative to this TUI's directory, not to that of the
        # controller it may be attached to, which reads the file
        self._prompt("Job spec to submit (a job.toml, a directory of them or a glob):",
                     [str(p) for p in example_job_specs()],
                     self._post_typed(lambda v: (SubmitJob(spec_file(v)), f"submit {Path(v).name}")), paths=True)

    def action_update_job(self, last_read_from: str = "") -> None:
        self._prompt("Job spec with the changes (the job of its name takes it: a job.toml, a directory or a glob):",
                     [str(p) for p in example_job_specs()],
                     self._post_typed(lambda v: (UpdateJobs(spec_file(v)), f"update from {Path(v).name}")),
                     last_read_from, paths=True)

    def action_connect_host(self) -> None:
        self._prompt("Host to (re)connect:", self._host_names(),
                     self._post_typed(lambda v: (ConnectHost(v), f"connect {v}")))

    def action_drain_host(self) -> None:
        """Offers the hosts not drained yet, and asks first, as d on the Cluster screen does, where
        the drain stops jobs (it drained at once: under auto-approve, jobs stopped unasked)."""
        def answered(name: str) -> None:
            host = self._hosts().get(name)
            if host is not None and host.drained:
                self.notify(f"{name} is drained already: nothing done (undrain host… takes it back)")  # type: ignore[attr-defined]
                return
            # a name not in the snapshot goes as typed: the controller says whether it knows it
            drain_asking_first(self, name, self.latest, self.post_intent)  # type: ignore[arg-type, attr-defined]

        self._prompt("Host to drain:", [h.name for h in self._hosts().values() if not h.drained], answered)

    def action_undrain_host(self) -> None:
        """Offers the drained hosts: the palette drained but could not undrain (only d on the
        Cluster screen could)."""
        def answered(name: str) -> None:
            host = self._hosts().get(name)
            if host is not None and not host.drained:
                self.notify(f"{name} is not drained: nothing done")  # type: ignore[attr-defined]
                return
            self.post_intent(DrainHost(name, False), f"undrain {name}")  # type: ignore[attr-defined]

        drained = [h.name for h in self._hosts().values() if h.drained]
        self._prompt("Host to undrain:" if drained else "Host to undrain (none is drained now):", drained, answered)

    def action_switch_policy(self) -> None:
        # the controller's own (an attached one may be of another version); it says whether a typed one exists
        known = list(self.latest.policies) if self.latest and self.latest.policies else ["heet"]  # type: ignore[attr-defined]
        self._prompt("Scheduling policy:", known, self._post_typed(lambda v: (SetPolicy(v), f"policy {v}")))

    def action_toggle_auto_approve(self) -> None:
        enabled = not (self.latest.auto_approve if self.latest else False)  # type: ignore[attr-defined]
        self.post_intent(SetAutoApprove(enabled), "auto-approve " + ("on" if enabled else "off"))  # type: ignore[attr-defined]
