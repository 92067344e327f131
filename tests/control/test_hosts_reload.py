"""Edits of the hosts file reach the running controller: hosts come and go without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import HostEntry, load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.drains import drained_hosts
from heet_tui.control.hosts_reload import HostsReloader, diff_hosts
from heet_tui.control.store import Store
from heet_tui.core.host import HostState
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def _entry(name: str, address: str = "", line: int = 1) -> HostEntry:
    return HostEntry(name, address or name, line=line)


def test_a_busy_host_keeps_its_entry_until_its_jobs_leave() -> None:
    old = (_entry("a"), _entry("b"), _entry("c"))
    new = (_entry("x", line=1), _entry("a", line=5), _entry("b", "10.0.0.9", line=9))  # c removed, b moved
    idle = diff_hosts(old, new, busy=set())
    assert (idle.added, idle.removed, idle.changed, idle.waiting) == (("x",), ("c",), ("b",), ())
    assert [h.name for h in idle.hosts] == ["x", "a", "b"]
    busy = diff_hosts(old, new, busy={"b", "c"})
    assert (busy.removed, busy.changed, busy.waiting) == ((), (), ("b", "c"))
    assert {h.name: h.address for h in busy.hosts} == {"x": "x", "a": "a", "b": "b", "c": "c"}, "kept as they were"
    assert diff_hosts(old, (_entry("a", line=7), _entry("b"), _entry("c")), set()).empty, "a new line is no change"


def test_a_changed_hosts_file_is_read_once_it_has_stayed_the_same_a_moment(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A file caught half-written was applied as it stood: its missing hosts were removed, their
    job stopped under auto-approve, and all put back seconds later."""
    from heet_tui.control import hosts_reload

    clock = [100.0]
    monkeypatch.setattr(hosts_reload.time, "monotonic", lambda: clock[0])
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n')
    reloader = HostsReloader(path)
    assert not reloader.due()
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n[[hosts]]\nname = "b"\n')  # half of it
    assert not reloader.due()
    clock[0] += 1.0
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n[[hosts]]\nname = "b"\ntransport = "local"\n')
    assert not reloader.due(), "still changing"
    clock[0] += 1.0
    assert not reloader.due()
    clock[0] += hosts_reload.SETTLE_S
    assert reloader.due()


def test_hosts_added_broken_and_removed_while_the_controller_runs(tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "A100", 1, 1.0)])
    first = path.read_text()
    store = Store(tmp_path / "state")

    def ready(snap, names):
        return {h.name for h in snap.hosts if h.state is HostState.READY} == names

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: ready(s, {"one"}), 30, "host one")
            write_local_hosts(tmp_path, [("one", "A100", 1, 1.0), ("two", "T4", 2, 0.5)])  # as `hosts add` would
            snap = await wait_for(ctl, lambda s: ready(s, {"one", "two"}), 30, "host two, added to the file")
            assert "hosts file reloaded: added two" in snap.notices
            assert {h.name: h.gpu_type for h in snap.hosts}["two"] == "T4"
            write_local_hosts(tmp_path, [("one", "A100", 1, 1.0), ("two", "T4", 2, 0.25)])  # edited: reconnected
            await wait_for(ctl, lambda s: any("reconnecting two" in n for n in s.notices) and ready(s, {"one", "two"}),
                           30, "host two, reconnected")
            said = [e.message for e in store.events(limit=100) if e.kind == "host" and e.host == "two"]
            assert said == [], f"reconnected on purpose, it was never out: {said}"
            write_local_hosts(tmp_path, [("one", "A100", 1, 0.5), ("two", "T4", 2, 0.25)])  # the first one edited
            snap = await wait_for(ctl, lambda s: any("reconnecting one" in n for n in s.notices)
                                  and ready(s, {"one", "two"}), 30, "host one, reconnected")
            assert [h.name for h in snap.hosts] == ["one", "two"], "in the file's order, as the TUI shows them"

            good = path.read_text()
            path.write_text(good + "\n[[hosts]]\nname = 3\n")
            snap = await wait_for(ctl, lambda s: any("not reloaded" in n for n in s.notices), 30, "a refusal")
            refusal = next(n for n in snap.notices if "not reloaded" in n)
            assert "hosts.toml:17: host #3" in refusal and "keeps the 2 hosts it had" in refusal, refusal
            assert ready(snap, {"one", "two"}), "a broken file changes nothing"
            path.write_text(good)  # fixed: the refusal must not stay the last word
            await wait_for(ctl, lambda s: s.notices[-1] == "hosts file reloaded: it reads again, with no change "
                           "to the hosts", 30, "the all-clear")

            path.write_text(first)
            # one back as it was; the notice may come a snapshot after the host list (seen on a loaded machine)
            await wait_for(ctl, lambda s: {h.name for h in s.hosts} == {"one"}
                           and "hosts file reloaded: removed two; reconnecting one" in s.notices, 30, "host two removed")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_controller_on_the_bundled_config_follows_the_users_first_copy(monkeypatch) -> None:
    from heet_tui.config.hosts_file import bundled_config, editable_hosts_path, user_hosts_path

    bundled = bundled_config("local.toml")
    reloader = HostsReloader(bundled)
    assert not reloader.due()
    path, copied = editable_hosts_path(bundled)  # what the hosts screen or `hosts add` does first
    assert copied and path == user_hosts_path() and reloader.due() and reloader.path == path
    other = HostsReloader(bundled)  # started with --hosts on the bundled file beside an own file:
    path.write_text(path.read_text() + "\n")
    assert not other.due() and other.path == bundled, "it stays on the file it was given"
    path.unlink()
    third = HostsReloader(bundled)
    path.write_text('[[hosts]]\nname = "real-gpu-box"\n')  # written by hand, not by an edit of the bundled one
    assert not third.due() and third.path == bundled, "a file the user wrote otherwise is not taken over"


def test_a_host_removed_while_running_a_job_is_drained_then_dropped(tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=3000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING
                                  and store.job("a").job.steps_done >= 20, 90, "a running")
            (host,) = job(snap, "a").allocation.host_names
            other = "two" if host == "one" else "one"
            write_local_hosts(tmp_path, [(other, "T4", 1, 1.0)])  # as `heet-tui hosts remove` would
            snap = await wait_for(ctl, lambda s: any(h.name == host and h.drained for h in s.hosts), 30,
                                  f"{host} drained")
            assert f"hosts file reloaded: {host} drained and dropped once its jobs have moved" in " ".join(
                snap.notices)
            await wait_for(ctl, lambda s: job(s, "a").allocation is not None
                           and job(s, "a").allocation.host_names == (other,), 90, f"a moved to {other}")
            await wait_for(ctl, lambda s: [h.name for h in s.hosts] == [other], 30, f"{host} dropped")
            assert drained_hosts(ctl.store) == set(), "the user's own drain list is untouched"
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_second_controller_on_the_same_hosts_is_refused_and_the_first_keeps_them(tmp_path: Path) -> None:
    # Seen in tmux: `heet-tui run` with another state dir beside the TUI; the two took each
    # host from each other every few seconds and neither ran anything.
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])

    async def scenario() -> None:
        first = Controller(load_hosts(path), Store(tmp_path / "state-a"), ControllerOptions(interval_s=0.2))
        second = Controller(load_hosts(path), Store(tmp_path / "state-b"), ControllerOptions(interval_s=0.2))
        await first.start()
        try:
            await wait_for(first, lambda s: [h.state for h in s.hosts] == [HostState.READY], 30, "first ready")
            await second.start()
            try:
                snap = await wait_for(second, lambda s: s.hosts[0].state is HostState.AGENT_ERROR, 30,
                                      "the second refused")
                assert "managed by another heet-tui controller" in snap.hosts[0].message
                await asyncio.sleep(3.0)  # the second retries meanwhile; the first must not lose the host
                await first.publish()
                assert first.hub.latest.hosts[0].state is HostState.READY
                assert not any("lost" in e.message for e in first.store.events(limit=100))
            finally:
                await second.stop()
        finally:
            await first.stop()

    run_and_clean(scenario, tmp_path)


def test_a_changed_emulated_speed_forgets_the_measurements_taken_at_the_old_one(tmp_path: Path) -> None:
    """A T4 made 3x faster by hand was still planned at its old rate: the old measurements stayed,
    and as the type had an estimate it was never measured again."""
    path = write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.3)])
    store = Store(tmp_path / "state")
    for gpu_type, rate in (("A100", 900.0), ("T4", 120.0)):
        store.add_observation("old-job", gpu_type, "1", rate, 1.0, "running")

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: all(h.state is HostState.READY for h in s.hosts), 30, "hosts")
            assert ctl.book.measured_types("old-job") == {"A100", "T4"}
            write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.9)])
            snap = await wait_for(ctl, lambda s: any("reconnecting slow" in n for n in s.notices), 30, "the reload")
            said = next(n for n in snap.notices if "reconnecting slow" in n)
            assert "slow's emulated speed went from 0.3 to 0.9: its 1 measurement(s) on T4 are forgotten" in said, said
            assert ctl.book.measured_types("old-job") == {"A100"}
        finally:
            await ctl.stop()
        assert [r[1] for r in store.observations()] == ["A100"]

    run_and_clean(scenario, tmp_path)


def test_each_new_edit_of_a_busy_host_is_said_though_it_leads_to_the_same_words(tmp_path: Path) -> None:
    """Seen: a second edit of a host running a job (type A100, then V100) was said nowhere: its
    message matched the one said for the first, and each thing is said once."""
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            kept = "one kept as before while jobs run there"
            for speed in (0.5, 0.25):
                before = ctl.notices.total
                write_local_hosts(tmp_path, [("one", "T4", 1, speed)])
                await wait_for(ctl, lambda s, before=before: any(kept in n for n in ctl.notices.since(before)), 30,
                               f"the edit to speed {speed} said")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_new_rack_or_tags_apply_at_once_without_a_reconnect() -> None:
    """A changed rack reconnected the host, and on a host running a job waited for the job to end."""
    from dataclasses import replace

    old = (_entry("a"), _entry("b"))
    new = (replace(_entry("a"), rack="r7", tags=("nvlink",)), _entry("b", "10.0.0.9"))
    diff = diff_hosts(old, new, busy={"a", "b"})
    assert (diff.relabelled, diff.changed, diff.waiting) == (("a",), (), ("b",))
    assert {h.name: (h.rack, h.tags) for h in diff.hosts}["a"] == ("r7", ("nvlink",))


def test_a_relabelled_host_running_a_job_keeps_its_connection_and_shows_the_rack(tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            supervisor = ctl.cluster._supervisors["one"]
            path.write_text(path.read_text().replace('name = "one"', 'name = "one"\nrack = "r7"'))
            snap = await wait_for(ctl, lambda s: s.hosts[0].rack == "r7", 30, "the new rack shown")
            assert ctl.cluster._supervisors["one"] is supervisor, "not reconnected"
            assert snap.hosts[0].state is HostState.READY and job(snap, "a").state is JobState.RUNNING
            assert any("new rack or tags for one" in n for n in ctl.notices.since(0))
            assert not any("kept as before" in n for n in ctl.notices.since(0))
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_an_edited_host_is_tried_again_by_the_jobs_that_died_on_it(tmp_path: Path) -> None:
    """A host whose python lacked torch: the jobs' model was kept off it, and after the fix (a new
    python in the file) it still was, across restarts, said only by heet-tui status."""
    import json

    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.control.host_health import stored_avoided

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=10, max_gpus=1)), 0.0)
    store.set_setting("crash_avoided", json.dumps([["a", 32, ["one"]]]))  # its runs died there at once

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
            assert stored_avoided(store) == {("a", 32): {"one"}}
            write_local_hosts(tmp_path, [("one", "T4", 1, 0.5)])  # the host edited
            await wait_for(ctl, lambda s: any("may run there again" in n for n in ctl.notices.since(0)), 30,
                           "the edit said to lift the mark")
            assert stored_avoided(store) == {}
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_host_removed_while_it_holds_a_queued_jobs_checkpoint_stays_until_it_is_copied_off(tmp_path: Path) -> None:
    """`hosts remove a` with a's jobs stopped (nowhere to go): a was dropped at once, and the job
    later started elsewhere from step 0 while its checkpoint sat on a, which was up."""
    from control_lab import manual_controller

    from heet_tui.config.job_spec import load_job_spec

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=3000, max_gpus=1)), 0.0)

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store) as ctl:
            ctl.executor.checkpoints.remember("a", "one")  # where its last run's rank 0 wrote it
            write_local_hosts(tmp_path, [("two", "T4", 1, 1.0)])  # as `heet-tui hosts remove one` would
            said = await ctl.hosts_reloader.reload(ctl)
            assert "one" in [h.name for h in ctl.hosts.hosts] and "one" in ctl.drained(), said
            assert "one also once the checkpoints it holds are copied to where their jobs start next" in said[0]
            ctl.executor.checkpoints.remember("a", "two")  # started there, its checkpoint brought along
            await ctl.hosts_reloader.reload(ctl)
            assert [h.name for h in ctl.hosts.hosts] == ["two"]

    run_and_clean(scenario, tmp_path)


def test_a_host_kept_for_a_checkpoint_is_kept_by_the_next_controller_too(tmp_path: Path) -> None:
    """The hold lived in the running controller alone: after a restart the host was unknown, and
    the job started elsewhere from step 0 while its checkpoint sat on a host that was up."""
    from control_lab import manual_controller

    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.control.hosts_reload import HOLDING
    from heet_tui.control.kept_hosts import KEPT_SETTING

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=3000, max_gpus=1)), 0.0)

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store) as ctl:
            ctl.executor.checkpoints.remember("a", "one")
            write_local_hosts(tmp_path, [("two", "T4", 1, 1.0)])  # as `heet-tui hosts remove one` would
            await ctl.hosts_reloader.reload(ctl)
            assert "one" in ctl.drained()
        async with manual_controller(load_hosts(path), store) as ctl:  # the file no longer has it
            assert [h.name for h in ctl.hosts.hosts] == ["two", "one"] and "one" in ctl.drained()
            snap = await wait_for(ctl, lambda s: any(h.name == "one" and h.state.value == "ready" for h in s.hosts),
                                  30, "the kept host connected again")
            assert next(h for h in snap.hosts if h.name == "one").drained_why == HOLDING
            await ctl.hosts_reloader.reload(ctl)  # still holding: still kept
            assert "one" in [h.name for h in ctl.hosts.hosts]
            ctl.executor.checkpoints.remember("a", "two")  # started there, its checkpoint brought along
            await ctl.hosts_reloader.reload(ctl)
            assert [h.name for h in ctl.hosts.hosts] == ["two"] and not store.setting(KEPT_SETTING)
        async with manual_controller(load_hosts(path), store) as ctl:
            assert [h.name for h in ctl.hosts.hosts] == ["two"], "dropped for good"

    run_and_clean(scenario, tmp_path)


def test_hosts_remove_with_no_controller_leaves_the_host_to_the_next_one_to_keep(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from control_lab import manual_controller

    from heet_tui.cli.main import main
    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.control.checkpoint_hosts import CheckpointHosts

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0), ("idle", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=3000, max_gpus=1)), 0.0)
    CheckpointHosts(store, lambda: 2.0).remember("a", "one")
    where = ["--hosts", str(path), "--state", str(store.dir)]
    assert main(["hosts", "remove", "idle", *where]) == 0
    assert main(["hosts", "remove", "one", *where]) == 0
    said = capsys.readouterr().out
    assert "no controller runs now; the next one keeps the host, drained, until it is copied" in said, said

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store) as ctl:
            assert [h.name for h in ctl.hosts.hosts] == ["two", "one"], "the idle host is not kept"
            assert "one" in ctl.drained()
        # a copy of the file under another name keeps it too: the hold is for the store's job (it was
        # tied to the file's path, and a controller on a copy held the job where it was instead)
        copy = tmp_path / "x" / "hosts.toml"
        copy.write_text(path.read_text())
        async with manual_controller(load_hosts(copy), store) as ctl:
            assert [h.name for h in ctl.hosts.hosts] == ["two", "one"] and "one" in ctl.drained()

    (tmp_path / "x").mkdir()
    run_and_clean(scenario, tmp_path)
