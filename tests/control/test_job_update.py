"""``heet-tui update JOB.toml``: a submitted job takes a changed spec and keeps its id, place,
progress and checkpoint (control/job_update.py). A running job whose processes were started
with the old command or target is relaunched from its checkpoint; the rest applies at once.
A running job updated under a running controller is tests/e2e/test_elastic_e2e.py's j3."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, started_controller, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import load_job_spec
from heet_tui.control.controller import ControllerOptions
from heet_tui.control.job_update import UPDATED, needs_relaunch, spec_changes, update_problem
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob, UpdateJobs
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

SPEC = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10), checkpoint_dir="/ck/j")
BASE = 'name = "{}"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 32\ntarget = {{ steps = 10 }}\n'


def test_what_changed_is_named_and_what_names_the_job_measurements_or_checkpoints_is_refused() -> None:
    wider = JobSpec("j", ("python3", "t.py", "--lr", "0.1"), "m", 32, Target(TargetKind.STEPS, 20),
                    checkpoint_dir="/ck/j", max_gpus=8, gpu_types=("A100",), stop_grace_s=90)
    assert spec_changes(SPEC, wider) == ["command: python3 t.py -> python3 t.py --lr 0.1",
                                         "target: 10 steps -> 20 steps", "max_gpus: 1 -> 8",
                                         "gpu_types: any -> A100", "stop_grace: default -> 90"]
    assert spec_changes(SPEC, SPEC) == [] and update_problem(SPEC, wider, JobState.RUNNING) is None
    # whole, as people read it: it said "target: 10 steps -> 4e+06 steps"
    assert spec_changes(SPEC, replace(SPEC, target=Target(TargetKind.STEPS, 4e6))) == [
        "target: 10 steps -> 4,000,000 steps"]
    assert spec_changes(replace(SPEC, workdir="/src"), SPEC) == ["workdir: /src -> default"], "not '/src -> '"
    # env by its keys: values are often tokens, and the change is printed, stored and logged
    secret = replace(SPEC, env=(("HF_TOKEN", "hf_old"), ("SEED", "1")))
    assert spec_changes(secret, replace(SPEC, env=(("HF_TOKEN", "hf_new"), ("LR", "0.1")))) == [
        "env: HF_TOKEN changed, LR added, SEED removed"]
    assert needs_relaunch(SPEC, wider)
    assert not needs_relaunch(SPEC, JobSpec("j", SPEC.command, "m", 32, SPEC.target, checkpoint_dir="/ck/j",
                                            max_gpus=8, priority=3, stop_grace_s=90)), "the scheduler's alone"
    other = JobSpec("j", SPEC.command, "m", 64, SPEC.target, checkpoint_dir="/ck/j")
    assert update_problem(SPEC, other, JobState.QUEUED).startswith("batch_size cannot change (its measurements")
    moved = JobSpec("j", SPEC.command, "m", 32, SPEC.target, checkpoint_dir="/elsewhere")
    assert "checkpoint_dir cannot change (its checkpoints are there: /ck/j -> /elsewhere)" in update_problem(
        SPEC, moved, JobState.FAILED)
    assert update_problem(SPEC, SPEC, JobState.DONE) == "it is done; submit it as a new job"


def test_update_from_the_command_line_changes_all_or_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path / "state")
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(BASE.format(name))
        store.add_jobs([load_job_spec(tmp_path / f"{name}.toml")], 1.0)
    store.update_progress("a", 4, 128, "/ck/a.pt")
    state = ["--state", str(tmp_path / "state")]
    (tmp_path / "a.toml").write_text(BASE.format("a") + "max_gpus = 4\npriority = 2\n")
    (tmp_path / "b.toml").write_text(BASE.format("b").replace("model = \"m\"", "model = \"other\""))
    assert main([*state, "update", str(tmp_path / "a.toml"), str(tmp_path / "b.toml")]) == 2
    err = capsys.readouterr().err
    assert "b.toml: job b: model cannot change" in err and "nothing updated" in err
    assert store.job("a").job.spec.max_gpus == 1, "one bad file: none changes"
    assert main([*state, "update", str(tmp_path / "missing.toml")]) == 2

    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert capsys.readouterr().out.startswith("updated a: max_gpus: 1 -> 4; priority: 0 -> 2")
    rec = store.job("a")
    assert (rec.job.spec.max_gpus, rec.job.spec.priority, rec.job.steps_done, rec.checkpoint) == (4, 2, 4, "/ck/a.pt")
    assert any(e.kind == "update" and "max_gpus: 1 -> 4" in e.message for e in store.events("a"))
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert capsys.readouterr().out == "a: nothing changed\n"
    (tmp_path / "c.toml").write_text(BASE.format("c"))
    assert main([*state, "update", str(tmp_path / "c.toml")]) == 2
    assert "no job named 'c' (heet-tui submit queues a new one)" in capsys.readouterr().err

    # a running job given a target behind what it has trained: "it restarts from its checkpoint", and
    # it ended, done, at once
    store.set_state("a", JobState.RUNNING, 2.0)
    store.update_progress("a", 4, 128.0, "/ck/a.pt")
    (tmp_path / "a.toml").write_text(BASE.format("a").replace("steps = 10", "steps = 3") + "max_gpus = 4\npriority = 2\n")
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(
        "; it is past its new target already: it stops, done, when the controller next runs")


def test_a_spec_submitted_twice_updates_the_newest_job_of_its_name(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The first job's id is its name too, and the id won: the older job took the update."""
    (tmp_path / "a.toml").write_text(BASE.format("a"))
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(tmp_path / "a.toml"), str(tmp_path / "a.toml")]) == 0
    (tmp_path / "a.toml").write_text(BASE.format("a") + "max_gpus = 3\n")
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert "updated a-2: max_gpus: 1 -> 3" in capsys.readouterr().out
    store = Store(tmp_path / "state")
    assert (store.job("a").job.spec.max_gpus, store.job("a-2").job.spec.max_gpus) == (1, 3)
    assert main([*state, "cancel", "a"]) == 0
    assert store.job("a").job.state is JobState.CANCELLED, "an id names its own job"
    assert store.job("a-2").job.state is JobState.QUEUED


def test_a_job_remembers_the_file_its_spec_was_last_read_from_as_an_absolute_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `u` on the Jobs screen offers; relative to where heet-tui ran, not to where the
    controller that reads it again runs."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "a.toml").write_text(BASE.format("a"))
    monkeypatch.chdir(tmp_path / "jobs")
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", "a.toml"]) == 0
    store = Store(tmp_path / "state")
    assert store.job("a").spec_file == str(tmp_path / "jobs" / "a.toml")
    assert f"submitted a from {tmp_path / 'jobs' / 'a.toml'}" in [e.message for e in store.events("a")]
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "a.toml").write_text(BASE.format("a") + "max_gpus = 2\n")
    assert main([*state, "update", "../v2/a.toml"]) == 0
    assert store.job("a").spec_file == str(tmp_path / "v2" / "a.toml")
    (tmp_path / "v2" / "same.toml").write_text(BASE.format("a") + "max_gpus = 2\n")
    assert main([*state, "update", "../v2/same.toml"]) == 0
    assert store.job("a").spec_file == str(tmp_path / "v2" / "a.toml"), "nothing changed: nothing recorded"


def _slow_job(tmp_path: Path) -> tuple:
    """A one-GPU host slow enough that a job stops near where it was updated, and a long job."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 0.05)]))
    path = write_job(tmp_path, "long", steps=100_000, max_gpus=1, every=10)
    return hosts, Store(tmp_path / "state"), path, ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)


async def _submitted_and_running(ctl, store: Store, path: Path) -> None:
    await ctl.post(SubmitJob(str(path)))
    await wait_for(ctl, lambda _: store.job("long").job.steps_done >= 10, 90, "the job running")


def test_a_changed_command_is_printed_quoted_as_jobs_name_shows_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`update` printed "command: python train_plain.py --out out/plain dir -> ...": one argument
    read as two, where `jobs NAME` shows 'out/plain dir'."""
    store = Store(tmp_path / "state")
    spec = BASE.format("a").replace('["python3", "t.py"]', '["python", "train_plain.py", "--out", "out/plain dir"]')
    (tmp_path / "a.toml").write_text(spec)
    store.add_jobs([load_job_spec(tmp_path / "a.toml")], 1.0)
    (tmp_path / "a.toml").write_text(spec.replace('"out/plain dir"]', '"out/plain dir", "--lr", "0.1"]'))
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    updated = capsys.readouterr().out
    assert ("command: python train_plain.py --out 'out/plain dir' -> python train_plain.py --out 'out/plain dir' "
            "--lr 0.1") in updated, updated
    assert main([*state, "jobs", "a"]) == 0
    assert "python train_plain.py --out 'out/plain dir' --lr 0.1" in capsys.readouterr().out


def test_the_tui_intent_updates_as_the_command_does(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    path = tmp_path / "a.toml"
    path.write_text(BASE.format("a") + "min_gpus = 2\nmax_gpus = 2\n")  # cannot start on one GPU: stays queued

    async def scenario() -> None:
        async with started_controller(hosts, store, ControllerOptions(interval_s=0.3, profile=False)) as ctl:
            await ctl.post(SubmitJob(str(path)))
            assert store.job("a").spec_file == str(path)
            path.write_text(BASE.format("a") + "min_gpus = 2\nmax_gpus = 2\npriority = 5\n")
            assert await ctl.post(UpdateJobs(str(path))) == "updated a: priority: 0 -> 5"
            path.write_text(BASE.format("a").replace("batch_size = 32", "batch_size = 64"))
            with pytest.raises(ValueError, match=r"a.toml: job a: batch_size cannot change"):
                await ctl.post(UpdateJobs(str(path)))
        assert store.job("a").job.spec.priority == 5 and store.job("a").job.spec.batch_size == 32

    run_and_clean(scenario, tmp_path)


def test_a_relaunch_request_lasts_until_a_launch_built_from_the_new_spec(tmp_path: Path) -> None:
    """So a job updated while no controller ran is relaunched by the next one, whose recovered
    run knows only the store's (new) spec; and an update made while a launch was being prepared
    from the old spec still relaunches."""
    from heet_tui.core.allocation import Allocation

    store = Store(tmp_path / "state")
    store.add_job(SPEC, 1.0)
    longer = JobSpec("j", SPEC.command, "m", 32, Target(TargetKind.STEPS, 20), checkpoint_dir="/ck/j")
    alloc = Allocation.of("j", "T4", {"h": [0]})
    store.replace_spec("j", longer, relaunch=True)
    store.replace_spec("j", JobSpec("j", SPEC.command, "m", 32, longer.target, checkpoint_dir="/ck/j", priority=1),
                       relaunch=False)
    assert store.job("j").relaunch_requested, "a later update of the scheduler's fields keeps the request"
    store.record_allocation(alloc, 1, 2.0, SPEC)
    assert store.job("j").relaunch_requested, "launched from the old spec"
    store.record_allocation(alloc, 2, 3.0, store.job("j").job.spec)
    assert not store.job("j").relaunch_requested


def test_a_job_updated_while_no_controller_runs_is_relaunched_by_the_next_one(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    hosts, store, path, options = _slow_job(tmp_path)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await _submitted_and_running(ctl, store, path)
        target = store.job("long").job.steps_done + 30  # it trains on while no controller runs
        path.write_text(path.read_text().replace("steps = 100000", f"steps = {target}"))
        capsys.readouterr()
        assert main(["--state", str(tmp_path / "state"), "update", str(path)]) == 0
        assert "it restarts from its checkpoint when the controller next runs" in capsys.readouterr().out
        # Without auto-approve: the relaunch takes no plan (it waited, stopped, for one to be approved)
        async with started_controller(hosts, store, replace(options, auto_approve=False)) as ctl:
            await wait_for(ctl, lambda s: job(s, "long").state is JobState.DONE, 120, "the job done at its new target")
        assert store.job("long").job.steps_done == target
        events = store.events("long", limit=100)
        assert any(UPDATED in e.message and e.kind == "stopped" for e in events)
        launches = [e.message for e in events if e.kind == "launch"]
        assert len(launches) == 2 and launches[1].endswith(launches[0].partition(": ")[2]), "where it ran before"
        assert len(store.plans_with_status("approved", "applying", "applied")) == 1, "no plan relaunched it"

    run_and_clean(scenario, tmp_path)


def test_a_running_job_updated_out_of_its_gpus_restarts_once_where_the_plan_puts_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Its new command or target and a narrower GPU range at once: it was relaunched on the two GPUs
    # it had (over its new max_gpus) and, a second later, again on the one the plan gave it
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 0.05)]))
    store, path = Store(tmp_path / "state"), write_job(tmp_path, "long", steps=100_000, max_gpus=2, every=10)
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(path)))
            await wait_for(ctl, lambda s: job(s, "long").allocation is not None
                           and job(s, "long").allocation.num_gpus == 2 and store.job("long").job.steps_done >= 10,
                           90, "the job running on both GPUs")
            path.write_text(path.read_text().replace("steps = 100000", "steps = 200000")
                            .replace("max_gpus = 2", "max_gpus = 1"))
            capsys.readouterr()
            assert main(["--state", str(tmp_path / "state"), "update", str(path)]) == 0
            said = capsys.readouterr().out
            assert "when a plan gives it GPUs its new spec allows" in said and "next round" not in said
            def launches() -> list[str]:
                return [e.message for e in store.events("long", limit=100) if e.kind == "launch"]

            # the launch event follows the run by a moment: under load it was read before it was written
            await wait_for(ctl, lambda s: job(s, "long").allocation is not None
                           and job(s, "long").allocation.num_gpus == 1 and not store.job("long").relaunch_requested
                           and len(launches()) >= 2, 90, "the job relaunched on one GPU")
            assert len(launches()) == 2 and "1xA100" in launches()[1], launches()

    run_and_clean(scenario, tmp_path)


def test_an_update_that_would_stop_a_running_job_for_good_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in the script's name stopped a healthy job, which crashed three times and failed; a
    min_gpus no host could give stopped one into a wait for good."""
    hosts, store, path, options = _slow_job(tmp_path)
    path.write_text(path.read_text() + f'workdir = "{tmp_path}"\n')

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await _submitted_and_running(ctl, store, path)
            good = path.read_text()
            path.write_text(good.replace("training.py", "trainig.py"))
            capsys.readouterr()
            assert await asyncio.to_thread(main, ["--state", str(tmp_path / "state"), "update", str(path)]) == 2
            said = capsys.readouterr().err
            assert "job long: not updated:" in said and "where its relaunch would fail" in said, said
            with pytest.raises(ValueError, match="where its relaunch would fail"):
                await ctl.post(UpdateJobs(str(path)))
            assert any(a.endswith("/training.py") for a in store.job("long").job.spec.command), "unchanged"
            assert store.job("long").job.state is JobState.RUNNING and not store.job("long").relaunch_requested
            # one no host can hold: auto-approve stopped the job into a wait no plan could end
            path.write_text(good.replace("min_gpus = 1\nmax_gpus = 1", "min_gpus = 2\nmax_gpus = 2"))
            assert await asyncio.to_thread(main, ["--state", str(tmp_path / "state"), "update", str(path)]) == 2
            said = capsys.readouterr().err
            assert "job long: not updated: it runs now, and would be stopped for good: min_gpus = 2 is more " \
                   "than the hosts" in said, said
            assert store.job("long").job.spec.min_gpus == 1 and store.job("long").job.state is JobState.RUNNING

    run_and_clean(scenario, tmp_path)


def test_an_update_drops_the_plan_screen_edit_its_new_spec_rules_out(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Seen: tweaked to 1 GPU, then updated to min_gpus = 2: "it restarts when a plan gives it GPUs
    its new spec allows", and it ran on at 1 GPU to its end, no plan proposed, nothing said."""
    from heet_tui.control.user_constraints import set_user_constraints, user_constraints
    from heet_tui.core.sched_input import Constraints

    store = Store(tmp_path / "state")
    (tmp_path / "a.toml").write_text(BASE.format("a") + "max_gpus = 4\n")
    store.add_jobs([load_job_spec(tmp_path / "a.toml")], 1.0)
    set_user_constraints(store, "a", Constraints(fixed_count=1))
    state = ["--state", str(tmp_path / "state")]
    (tmp_path / "a.toml").write_text(BASE.format("a") + "min_gpus = 2\nmax_gpus = 4\n")
    capsys.readouterr()
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ("updated a: min_gpus: 1 -> 2; your edit on the Plan screen "
                                                       "(1 GPU(s)) is dropped: 1 GPU(s) is outside 2-4 of the new spec")
    assert user_constraints(store) == {}
    assert any(e.kind == "update" and "edit dropped (1 GPU(s))" in e.message for e in store.events("a"))
    set_user_constraints(store, "a", Constraints(fixed_count=3))  # within the range: it stays
    (tmp_path / "a.toml").write_text(BASE.format("a") + "min_gpus = 2\nmax_gpus = 4\npriority = 1\n")
    assert main([*state, "update", str(tmp_path / "a.toml")]) == 0
    assert user_constraints(store) == {"a": Constraints(fixed_count=3)}


def test_a_sweep_whose_first_members_ended_updates_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep with one member done could not be updated at all: "job sw-lr1: it is done"."""
    sweep = tmp_path / "sw.toml"
    sweep.write_text(BASE.format("sw-lr{lr}") + "max_gpus = 2\n\n[sweep]\nlr = [1, 2, 3]\n")
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(sweep)]) == 0
    store = Store(tmp_path / "state")
    store.set_state("sw-lr1", JobState.DONE, 5.0)
    sweep.write_text(sweep.read_text().replace("max_gpus = 2", "max_gpus = 1"))
    capsys.readouterr()
    assert main([*state, "update", str(sweep)]) == 0
    out = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("  warning: ")]
    assert out == ["updated sw-lr2: max_gpus: 2 -> 1", "updated sw-lr3: max_gpus: 2 -> 1",
                   "sw-lr1 has ended (done): left as it was"]
    assert [store.job(j).job.spec.max_gpus for j in ("sw-lr1", "sw-lr2", "sw-lr3")] == [2, 1, 1]
    # every member ended: nothing to update is an error, as for one job
    for j in ("sw-lr2", "sw-lr3"):
        store.set_state(j, JobState.CANCELLED, 6.0)
    assert main([*state, "update", str(sweep)]) == 2
    assert "every job of its sweep has ended; submit it as new jobs" in capsys.readouterr().err


def test_what_update_prints_of_a_spec_holds_no_terminal_sequences(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Its first line printed a changed command raw: a script path's OSC 0 retitled the terminal."""
    store = Store(tmp_path / "state")
    (tmp_path / "a.toml").write_text(BASE.format("a"))
    store.add_jobs([load_job_spec(tmp_path / "a.toml")], 1.0)
    (tmp_path / "a.toml").write_text(BASE.format("a").replace("t.py", "t\\u001b]0;TITLE\\u0007\\u202e.py"))
    assert main(["--state", str(tmp_path / "state"), "update", str(tmp_path / "a.toml")]) == 0
    out = capsys.readouterr().out
    assert "t\\x1b]0;TITLE\\x07\\u202e.py" in out.splitlines()[0] and "\x1b" not in out and "\u202e" not in out, out


def test_an_update_only_drained_hosts_could_hold_is_refused_for_a_running_job(tmp_path: Path) -> None:
    """Drained hosts were counted: min_gpus 13 passed beside a drained 12-GPU host, and auto-approve
    stopped the job into a wait for someone to undrain it."""
    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.control.drains import set_drained
    from heet_tui.control.job_update import UpdateRefused, planned_updates

    hosts = load_hosts(write_local_hosts(tmp_path, [("a", "A100", 1, 1.0), ("b", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    path = write_job(tmp_path, "long", steps=100_000, max_gpus=1)
    store.add_job(load_job_spec(path), 0.0)
    store.set_state("long", JobState.RUNNING, 1.0)
    wider = tmp_path / "wider.toml"
    wider.write_text(path.read_text().replace("min_gpus = 1\nmax_gpus = 1", "min_gpus = 2\nmax_gpus = 2"))
    spec = load_job_spec(wider)
    assert planned_updates(store, [spec], [wider], [], hosts)[0], "b holds two"
    set_drained(store, "b", True, "maintenance")
    with pytest.raises(UpdateRefused, match=r"would be stopped for good: min_gpus = 2 is more than .* \(drained, not "
                                            r"counted: b\); add the hosts \(or undrain them\) first"):
        planned_updates(store, [spec], [wider], [], hosts)
