"""The Profiles screen shows the cells plans are made from: where a job runs, and where the
pending plan puts it. Its grid of one-host counts left out a job spread over hosts (24 RTX2080Ti as
888), so the speed a plan promised was on no screen."""

from __future__ import annotations

from pathlib import Path

from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import load_job_spec
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan
from heet_tui.core.job import JobState


def test_a_job_spread_over_two_hosts_has_that_cell_shown(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("x", "T4", 1, 1.0), ("y", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    spec = write_job(tmp_path, "wide", steps=3000, max_gpus=2)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))
    store.add_job(load_job_spec(spec), 0.0)
    store.add_observation("wide", "T4", "1", 50.0, 0.0, "profiling")  # measured on one GPU: 11 is predicted

    async def scenario() -> None:
        async with manual_controller(hosts, store, profile=False) as ctl:
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            assert snap.plan.allocations["wide"].placement == (1, 1)
            (profile,) = [p for p in snap.profiles if p.job_id == "wide"]
            assert (profile.planned_on, profile.runs_on) == (("T4", "11"), None)
            cell = next(c for c in profile.cells if (c.gpu_type, c.config) == ("T4", "11"))
            assert not cell.measured and cell.samples_per_s > 0
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: job(s, "wide").state is JobState.RUNNING, 60, "wide running")
            (profile,) = [p for p in snap.profiles if p.job_id == "wide"]
            assert profile.runs_on == ("T4", "11") and ("T4", "11") in {(c.gpu_type, c.config) for c in profile.cells}

    run_and_clean(scenario, tmp_path)


def test_the_heat_map_names_and_underlines_those_cells() -> None:
    from heet_tui.core.snapshot import JobProfile, ProfileCell
    from heet_tui.ui.widgets.profile_heatmap import heatmap

    cells = (ProfileCell("T4", "1", 10.0, True), ProfileCell("T4", "11", 18.0, False, 0.2),
             ProfileCell("A100", "2", 80.0, False, 0.1))
    table = heatmap(JobProfile("j", cells, runs_on=("T4", "11"), planned_on=("A100", "2")))
    assert str(table.caption).endswith("underlined: runs now on T4 11; the pending plan puts it on A100 2")
    styles = {str(cell): cell.style for column in table.columns for cell in column._cells if hasattr(cell, "style")}
    assert "underline" in styles["~18 ±20%"] and "underline" in styles["~80 ±10%"]
    assert "underline" not in styles["●10"]
