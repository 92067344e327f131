"""A drained host renamed in the hosts file keeps its drain under the new name (split from
test_hosts_reload.py)."""

from __future__ import annotations

from pathlib import Path

from control_lab import run_and_clean, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.drains import drained_hosts
from heet_tui.control.store import Store


def test_a_drained_host_renamed_in_the_file_stays_drained_under_its_new_name(tmp_path: Path) -> None:
    """Renamed in the TUI's hosts editor, a drained host went back into service with no word,
    and its old name, drained still, would drain whatever host was given that name later."""
    from control_lab import manual_controller

    from heet_tui.control.drains import drain_reasons, set_drained

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    set_drained(store, "one", True, "drained by hand at 10:00:00 (d in the TUI)")

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store) as ctl:
            path.write_text(path.read_text().replace('name = "one"', 'name = "uno"'))
            said = await ctl.hosts_reloader.reload(ctl)
            assert said and "uno (was one) stays drained" in said[0], said
            assert drained_hosts(store) == {"uno"} and "uno" in ctl.drained()
            assert drain_reasons(store)["uno"] == "drained by hand at 10:00:00 (d in the TUI) (as one)"
            # a new host that differs in more than its name is another machine: not drained
            path.write_text(path.read_text().replace('name = "two"', 'name = "dos"').replace("w-two", "w-dos"))
            await ctl.hosts_reloader.reload(ctl)
            assert drained_hosts(store) == {"uno"}

    run_and_clean(scenario, tmp_path)



def test_a_drained_host_renamed_while_kept_for_a_checkpoint_leaves_no_drain_on_its_old_name(tmp_path: Path) -> None:
    """Kept under its old name for a queued job's checkpoint, the old name stayed drained after it was
    dropped: a new host given that name later came up drained, unsaid."""
    from control_lab import manual_controller

    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.control.drains import set_drained

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=3000, max_gpus=1)), 0.0)
    set_drained(store, "one", True, "drained by hand at 10:00:00 (in the TUI)")

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store) as ctl:
            ctl.executor.checkpoints.remember("a", "one")
            path.write_text(path.read_text().replace('name = "one"', 'name = "uno"'))
            await ctl.hosts_reloader.reload(ctl)
            assert "one" in [h.name for h in ctl.hosts.hosts] and {"one", "uno"} <= ctl.drained(), "kept, drained"
            assert drained_hosts(store) == {"uno"}, "the old name drained as leaving, not by record"
            ctl.executor.checkpoints.remember("a", "two")
            await ctl.hosts_reloader.reload(ctl)
            assert "one" not in [h.name for h in ctl.hosts.hosts]
            path.write_text(path.read_text() + f'[[hosts]]\nname = "one"\ntransport = "local"\n'
                            f'workdir = "{tmp_path / "w-new"}"\nemulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n')
            await ctl.hosts_reloader.reload(ctl)
            assert "one" in [h.name for h in ctl.hosts.hosts] and "one" not in ctl.drained()

    run_and_clean(scenario, tmp_path)
