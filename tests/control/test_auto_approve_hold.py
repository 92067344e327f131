"""What auto-approve applies: a plan that only starts queued jobs always (it restarts nothing);
one that restarts running jobs only for a gain over the threshold, and otherwise says why."""

from __future__ import annotations

from heet_tui.control.planning import held_back
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect


def _plan(current: dict[str, Allocation], proposed: dict[str, Allocation], *predictions: JobPrediction) -> Plan:
    return Plan.build(current, proposed, "heet", 0.0, PredictedEffect(tuple(predictions)))


def test_a_plan_of_starts_is_applied_whatever_its_predicted_gain() -> None:
    """Seen: a start predicted at a near-zero rate (a size that had crashed) waited for approval
    under auto-approve, with nothing said, for as long as the controller ran."""
    book = ThroughputBook()
    two = Allocation.of("j", "T4", {"h": [0, 1]})
    weak_start = _plan({}, {"j": two}, JobPrediction("j", 0.0, 1e-6, None, 0.0),
                       *(JobPrediction(f"r{i}", 100.0, 100.0, None, 0.0) for i in range(30)))
    assert held_back(weak_start, book, frozenset(), set(), 0.05) is None
    one = Allocation.of("r0", "T4", {"g": [0]})
    grow = _plan({"r0": one}, {"r0": Allocation.of("r0", "T4", {"g": [0, 1]})},
                 JobPrediction("r0", 100.0, 101.0, None, 30.0))
    assert held_back(grow, book, frozenset(), set(), 0.05) == (
        "its predicted gain, 1.0%, is below the auto-approve threshold of 5%")
    assert held_back(grow, book, frozenset(), set(), 0.005) is None
    # a small throughput gain but a much shorter predicted average JCT (a queued job starts sooner):
    # "gain 1.0%, below the threshold" beside "14m11s with this plan, 28m08s without it"
    from dataclasses import replace

    sooner = replace(grow, effect=replace(grow.effect, avg_jct_s=851.0, avg_jct_before_s=1688.0))
    assert held_back(sooner, book, frozenset(), set(), 0.05) is None
    barely = replace(grow, effect=replace(grow.effect, avg_jct_s=1650.0, avg_jct_before_s=1688.0))
    assert held_back(barely, book, frozenset(), set(), 0.05) is not None, "2% sooner: below the threshold"


def test_a_move_off_gpus_the_spec_no_longer_allows_is_applied_whatever_it_gains() -> None:
    """A running job updated to gpu_types = ["A100"] stayed on its T4s under auto-approve: the
    move was held for "gaining -100.0%", plan after plan."""
    from heet_tui.control.planning import outside_spec
    from heet_tui.core.job import JobSpec, Target, TargetKind

    t4 = Allocation.of("r0", "T4", {"g": [0, 1, 2]})
    spec = JobSpec("r0", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10), max_gpus=2, gpu_types=("A100",))
    misplaced = outside_spec([("r0", spec, t4)])
    assert misplaced == {"r0"}
    assert outside_spec([("r0", spec, Allocation.of("r0", "A100", {"a": [0, 1]}))]) == frozenset()
    move = _plan({"r0": t4}, {"r0": Allocation.of("r0", "A100", {"a": [0, 1]})},
                 JobPrediction("r0", 100.0, 0.0, None, 30.0))
    assert held_back(move, ThroughputBook(), frozenset(), set(), 0.05) is not None, "the case: it gains nothing"
    assert held_back(move, ThroughputBook(), frozenset(), set(), 0.05, misplaced) is None


def test_heet_tui_run_says_why_auto_approve_holds_a_plan(tmp_path, capsys, monkeypatch) -> None:
    from types import SimpleNamespace

    from heet_tui.cli.commands import run
    from heet_tui.control.store import Store

    monkeypatch.setattr(run, "SETTLE_S", 0.0)
    store = Store(tmp_path / "state")
    one = Allocation.of("r0", "T4", {"g": [0]})
    plan_id = store.add_plan(_plan({"r0": one}, {"r0": Allocation.of("r0", "T4", {"g": [0, 1]})},
                                   JobPrediction("r0", 100.0, 101.0, None, 30.0)))
    ctl = SimpleNamespace(pending_plan_id=plan_id, auto_approve=True, store=store,
                          held_why="its predicted gain, 1.0%, is below the auto-approve threshold of 5%")
    seen = run._proposed(ctl, (None, 0.0, False))
    assert run._proposed(ctl, seen)[2], "said"
    out = capsys.readouterr().out
    assert f"plan #{plan_id} proposed and not auto-approved: its predicted gain, 1.0%, is below" in out
    ctl.held_why = None  # being applied: nothing to say
    assert not run._proposed(ctl, run._proposed(ctl, (None, 0.0, False)))[2]


def test_a_plan_that_just_failed_is_said_to_wait_and_until_when(tmp_path) -> None:
    """Seen: under auto-approve, a plan whose launch had failed was proposed again and held back for
    a minute while its job read "waiting for approval" and the Plan screen "auto-approve ON: plans
    apply without asking"."""
    import asyncio

    from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller, ControllerOptions
    from heet_tui.control.store import Store
    from heet_tui.core.intents import SubmitJob

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=20, command=["no-such-command-here"]))))
            snap = await wait_for(ctl, lambda s: "not auto-approved" in job(s, "b").message, 60, "b said to wait")
            message = job(snap, "b").message
            assert "the same plan failed at" in message and "auto-approve tries it again at" in message, message
            assert "(b: launch on 1xT4 on h[0] failed: rank 0 on h: launch refused: " in message, "and why"
            assert "waiting for approval" not in message
            assert snap.plan_id is not None and snap.held_why.startswith("the same plan failed at")
            await asyncio.sleep(1.0)
            assert job(ctl.hub.latest, "b").message == message, "the same words round after round"
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_the_starts_of_a_held_plan_onto_free_gpus_go_ahead_alone() -> None:
    """At lab scale a plan of 2 migrates, 3 starts and a stop was held for a 1.1% gain, and its
    starts with it: jobs sat queued for a minute while the Cluster screen showed idle GPUs."""
    from heet_tui.control.planning import free_starts
    from heet_tui.core.plan import ChangeKind

    running = Allocation.of("r", "T4", {"g": [0]})
    stopping = Allocation.of("s", "T4", {"g": [1]})
    plan = _plan({"r": running, "s": stopping},
                 {"r": Allocation.of("r", "T4", {"g": [2]}),  # a migrate: held
                  "free": Allocation.of("free", "T4", {"h": [0, 1]}),  # onto idle GPUs
                  "freed": Allocation.of("freed", "T4", {"g": [1]})},  # onto the GPU the stop frees
                 JobPrediction("r", 100.0, 101.0, None, 30.0), JobPrediction("free", 0.0, 50.0, 600.0, 30.0),
                 JobPrediction("freed", 0.0, 40.0, 900.0, 30.0))
    starts = free_starts(plan)
    assert starts is not None
    assert [(c.job_id, c.kind) for c in starts.changes] == [("free", ChangeKind.START)]
    assert starts.allocations == {"r": running, "s": stopping, "free": Allocation.of("free", "T4", {"h": [0, 1]})}
    assert [p.job_id for p in starts.effect.jobs] == ["free"]
    only_moves = _plan({"r": running}, {"r": Allocation.of("r", "T4", {"g": [2]})})
    assert free_starts(only_moves) is None


def test_auto_approve_says_what_it_applied_a_plan_on() -> None:
    """Plan #28 shrank a running job and read "57s with this plan, as without it", yet was
    auto-approved: the gain it was applied on appeared nowhere."""
    from dataclasses import replace

    from heet_tui.control.planning import auto_verdict

    book = ThroughputBook()
    start = _plan({}, {"j": Allocation.of("j", "T4", {"h": [0]})}, JobPrediction("j", 0.0, 1.0, None, 0.0))
    assert auto_verdict(start, book, frozenset(), set(), 0.05) == (True, "it only starts queued jobs")
    one = Allocation.of("r0", "T4", {"g": [0]})
    grow = _plan({"r0": one}, {"r0": Allocation.of("r0", "T4", {"g": [0, 1]})},
                 JobPrediction("r0", 100.0, 101.0, None, 30.0))
    applied, why = auto_verdict(grow, book, frozenset(), set(), 0.005)
    assert applied and why == ("predicted gain 1.0% (the jobs' summed speed, each against its best measured one-GPU "
                               "speed) is at least the threshold of 0%"), why
    assert auto_verdict(grow, book, frozenset(), set(), 0.05) == (False, held_back(grow, book, frozenset(), set(), 0.05))
    sooner = replace(grow, effect=replace(grow.effect, avg_jct_s=851.0, avg_jct_before_s=1688.0))
    assert auto_verdict(sooner, book, frozenset(), set(), 0.05) == (True, "its predicted average JCT is 50% shorter")


def test_a_job_started_moments_ago_is_not_restarted_again_unasked() -> None:
    """At 30 jobs on 25 hosts, jobs were grown 2 -> 3 -> 4 and shrunk back to 2 within a minute,
    plan after plan, each applied for a predicted gain of 6-18%."""
    grow = _plan({"r0": Allocation.of("r0", "T4", {"g": [0]})}, {"r0": Allocation.of("r0", "T4", {"g": [0, 1]})},
                 JobPrediction("r0", 100.0, 150.0, None, 30.0))
    book = ThroughputBook()
    assert held_back(grow, book, frozenset(), set(), 0.05) is None, "the case: a gain over the threshold"
    held = held_back(grow, book, frozenset(), set(), 0.05, recent=frozenset({"r0"}))
    assert held == ("it restarts r0, started less than 120 s ago: auto-approve lets a job's new size be measured "
                    "before it restarts it again")
    assert held_back(grow, book, frozenset(), set(), 0.05, recent=frozenset({"other"})) is None
    start = _plan({}, {"r0": Allocation.of("r0", "T4", {"g": [0]})}, JobPrediction("r0", 0.0, 100.0, None, 0.0))
    assert held_back(start, book, frozenset(), set(), 0.05, recent=frozenset({"r0"})) is None, "a start restarts none"
    # held for its gain anyway: that is said ("started less than 120 s ago" read as if it would go ahead after)
    weak = _plan({"r0": Allocation.of("r0", "T4", {"g": [0]})}, {"r0": Allocation.of("r0", "T4", {"g": [0, 1]})},
                 JobPrediction("r0", 100.0, 101.0, None, 30.0))
    assert held_back(weak, book, frozenset(), set(), 0.05, recent=frozenset({"r0"})) == (
        "its predicted gain, 1.0%, is below the auto-approve threshold of 5%")


def test_a_plan_that_pauses_only_lower_priority_jobs_for_a_higher_one_is_applied() -> None:
    """A stop of a priority-0 job and a start of a priority-5 one "gained 0.0%" (the jobs' summed
    speed weighs every job alike), and auto-approve held it: the urgent job waited for the other to
    end by itself."""
    from heet_tui.control.planning import auto_verdict

    book = ThroughputBook()
    low = Allocation.of("low", "T4", {"h": [0]})
    swap = _plan({"low": low}, {"urgent": Allocation.of("urgent", "T4", {"h": [0]})},
                 JobPrediction("low", 100.0, 0.0, None, 30.0), JobPrediction("urgent", 0.0, 100.0, None, 30.0))
    assert auto_verdict(swap, book, frozenset(), set(), 0.05)[0] is False, "no priorities known: the gain rule"
    assert auto_verdict(swap, book, frozenset(), set(), 0.05, priorities={"low": 0, "urgent": 5}) == (
        True, "it gives GPUs to urgent (priority 5) from low, of lower priority")
    assert auto_verdict(swap, book, frozenset(), set(), 0.05, recent=frozenset({"low"}),
                        priorities={"low": 0, "urgent": 5})[0] is True, "not a size being measured: no settle wait"
    for same in ({"low": 5, "urgent": 5}, {"low": 7, "urgent": 5}):
        assert auto_verdict(swap, book, frozenset(), set(), 0.05, priorities=same)[0] is False, same
    # a job of the same or higher priority moved or shrunk on the way: not for priority alone
    mid = Allocation.of("mid", "T4", {"g": [0, 1]})
    also = _plan({"low": low, "mid": mid}, {"urgent": Allocation.of("urgent", "T4", {"h": [0]}),
                                             "mid": Allocation.of("mid", "T4", {"g": [0]})},
                 JobPrediction("low", 100.0, 0.0, None, 30.0), JobPrediction("urgent", 0.0, 100.0, None, 30.0),
                 JobPrediction("mid", 100.0, 60.0, None, 30.0))
    assert auto_verdict(also, book, frozenset(), set(), 0.05, priorities={"low": 0, "mid": 5, "urgent": 5})[0] is False
    assert auto_verdict(also, book, frozenset(), set(), 0.05, priorities={"low": 0, "mid": 1, "urgent": 5}) == (
        True, "it gives GPUs to urgent (priority 5) from low, mid, of lower priority")


def test_only_a_restart_that_brings_a_job_to_its_edit_is_carried_out_unasked() -> None:
    """Any restart of a job with an edit of any age was "carried out your edit": a job pinned to T4,
    already on T4, was grown by the policy 45 s after its start, past the gain threshold and the wait."""
    from heet_tui.control.planning import auto_verdict, breaks
    from heet_tui.core.sched_input import Constraints

    book = ThroughputBook()
    on_t4 = Allocation.of("a", "T4", {"b": [0]})
    grow = _plan({"a": on_t4}, {"a": Allocation.of("a", "T4", {"b": [0, 1]})}, JobPrediction("a", 100.0, 101.0, None, 30.0))
    pinned = {"a": Constraints(pinned_type="T4")}
    assert not breaks(pinned["a"], on_t4)
    assert auto_verdict(grow, book, frozenset(), set(), 0.05, edits=pinned) == (
        False, "its predicted gain, 1.0%, is below the auto-approve threshold of 5%")
    on_a100 = Allocation.of("a", "A100", {"x": [0]})
    move = _plan({"a": on_a100}, {"a": on_t4}, JobPrediction("a", 100.0, 50.0, None, 30.0))
    assert auto_verdict(move, book, frozenset(), set(), 0.05, edits=pinned) == (True, "it carries out your edit to a")
    assert breaks(Constraints(held=True), on_t4) and breaks(Constraints(fixed_count=2), on_t4)
    assert breaks(Constraints(pinned_hosts=("c",)), on_t4) and not breaks(Constraints(pinned_hosts=("b", "c")), on_t4)
