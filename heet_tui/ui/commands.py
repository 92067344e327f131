"""The command palette: submit job, connect host, drain and undrain host, switch policy, and the screens.

Commands that change anything are not offered at all in read-only mode.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider

SCREENS = (("cluster", "Cluster"), ("jobs", "Jobs"), ("plan", "Plan"), ("profiles", "Profiles"), ("hosts", "Hosts"))


def example_job_specs(root: Path | None = None) -> list[Path]:
    """Job specs a newcomer can submit straight away: ./examples/jobs and ./examples/sweeps, then
    the repository's own."""
    candidates = [base / "examples" / kind for base in (Path.cwd(), Path(__file__).resolve().parents[2])
                  for kind in ("jobs", "sweeps")]
    if root is not None:
        candidates.insert(0, root)
    seen: dict[Path, Path] = {}
    for folder in candidates:
        if folder.is_dir():
            for spec in sorted(folder.glob("*.toml")):
                seen.setdefault(spec.resolve(), spec)
    return list(seen.values())


class HeetCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.app
        out: list[tuple[str, Callable[[], object], str]] = []
        for mode, label in SCREENS:
            out.append((f"go to {label}", partial(app.switch_mode, mode), f"show the {label} screen"))
        if not getattr(app, "read_only", False):
            # The prompt first: "submit" + Enter used to submit the first example job at once.
            out.append(("submit job…", app.action_submit_job, "submit a job.toml by path"))  # type: ignore[attr-defined]
            for spec in example_job_specs():
                out.append((f"submit job {spec.name}", partial(app.submit_job_file, str(spec)),  # type: ignore[attr-defined]
                            f"submit {spec}"))
            latest = getattr(app, "latest", None)
            if latest is None or latest.mode != "demo":  # simulated hosts: offered, then refused after the name
                out += [
                    ("connect host…", app.action_connect_host, "(re)connect a host by name"),  # type: ignore[attr-defined]
                    ("drain host…", app.action_drain_host, "stop placing work on a host"),  # type: ignore[attr-defined]
                    ("undrain host…", app.action_undrain_host, "place work on a drained host again"),  # type: ignore[attr-defined]
                ]
            out += [
                ("switch policy…", app.action_switch_policy, "choose the scheduling policy"),  # type: ignore[attr-defined]
                ("toggle auto-approve", app.action_toggle_auto_approve, "apply plans without asking"),  # type: ignore[attr-defined]
            ]
        return out

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
