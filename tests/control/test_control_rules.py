"""The controller's pure rules: launch env per rank, exit verdicts, plan figures (estimates: test_throughput_book.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.launch import choose_master_port, plan_launch, plan_profile_launch, target_env
from heet_tui.control.runtime import (
    Outcome,
    RankProc,
    Run,
    backoff_s,
    judge,
    parse_agent_id,
    rank_agent_id,
    reached_target,
)
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import Job, JobSpec, JobState, Target, TargetKind


def _spec(**kw) -> JobSpec:
    return JobSpec("cnn", ("python3", "train.py", "--x"), "m", 64, Target(TargetKind.STEPS, 300),
                   env=(("OMP_NUM_THREADS", "1"),), **kw)


def test_one_process_per_gpu_with_distributed_env() -> None:
    hosts = {"b": HostEntry("b", "10.0.0.2", python="/opt/py/bin/python", workdir="/w"),
             "a": HostEntry("a", "10.0.0.1", python="/usr/bin/python3", workdir="/w")}
    alloc = Allocation.of("cnn", "T4", {"b": [3, 1], "a": [0]})
    launches = plan_launch("cnn", _spec(), alloc, 7, hosts, 29600)
    assert [(s.host, s.rank, s.gpus, s.agent_id) for s in launches] == [
        ("a", 0, (0,), "cnn.r0"), ("b", 1, (1,), "cnn.r1"), ("b", 2, (3,), "cnn.r2")]
    # each sees the job's GPUs on its host, its own at index LOCAL_RANK (torchrun's contract)
    assert [s.visible for s in launches] == [(0,), (1, 3), (1, 3)]
    assert all(s.visible[int(dict(s.env)["LOCAL_RANK"])] == s.gpus[0] for s in launches)
    env = [dict(s.env) for s in launches]
    assert {e["MASTER_ADDR"] for e in env} == {"10.0.0.1"} and {e["WORLD_SIZE"] for e in env} == {"3"}
    assert [(e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in env] == [("0", "0", "1"), ("1", "0", "2"),
                                                                                  ("2", "1", "2")]
    assert all(e["HEET_CHECKPOINT_DIR"] == "/w/checkpoints/cnn" and e["HEET_TARGET_STEPS"] == "300" for e in env)
    assert launches[1].argv == ("/opt/py/bin/python", "train.py", "--x"), "each host's own interpreter"
    assert all("HEET_CHECKPOINT_OWNER" not in e for e in env)
    owned = plan_launch("cnn", _spec(), alloc, 7, hosts, 29600, owner="0123456789abcdef")
    assert {dict(s.env)["HEET_CHECKPOINT_OWNER"] for s in owned} == {"0123456789abcdef"}  # the agents mark the dir
    assert [s.agent_id for s in owned] == ["cnn.r0.01234567", "cnn.r1.01234567", "cnn.r2.01234567"]
    # The default checkpoint dir names the store too: another store's "cnn" had claimed "cnn".
    assert {dict(s.env)["HEET_CHECKPOINT_DIR"] for s in owned} == {"/w/checkpoints/cnn.01234567"}
    earlier = plan_launch("cnn", _spec(), alloc, 7, hosts, 29600, owner="0123456789abcdef",
                          reported_checkpoint="/home/u/w/checkpoints/cnn/checkpoint.pt")
    assert {dict(s.env)["HEET_CHECKPOINT_DIR"] for s in earlier} == {"/w/checkpoints/cnn"}, "keeps its progress"
    with pytest.raises(ValueError, match="unknown host"):
        plan_launch("cnn", _spec(), Allocation.of("cnn", "T4", {"zz": [0]}), 1, hosts, 1)


def test_each_profiling_run_has_a_scratch_checkpoint_dir_of_its_own() -> None:
    host = HostEntry("a", "10.0.0.1", workdir="/w/")
    runs = [dict(plan_profile_launch("cnn", _spec(), host, 0, n, owner="0123456789abcdef").env) for n in (3, 4)]
    assert [e["HEET_CHECKPOINT_DIR"] for e in runs] == ["/w/profiling/cnn.p3.01234567",
                                                        "/w/profiling/cnn.p4.01234567"]
    assert all(e["HEET_CHECKPOINT_SCRATCH"] == "1" and e["HEET_CHECKPOINT_OWNER"] == "0123456789abcdef"
               for e in runs)
    assert "/w/checkpoints/cnn" not in {e["HEET_CHECKPOINT_DIR"] for e in runs}, "never the job's own"


def test_master_port_is_free_locally_and_varies_by_generation_and_store_remotely() -> None:
    local = HostEntry("l", "localhost", transport="local")
    port = choose_master_port("cnn", 1, local)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # it really is free
    remote = HostEntry("r", "gpu7.example.org")
    assert choose_master_port("cnn", 1, remote) != choose_master_port("cnn", 2, remote)
    # two users' stores, each with a job "cnn" at generation 1 on one host: not the same port
    assert len({choose_master_port("cnn", 1, remote, owner) for owner in ("alice-store", "bob-store")}) == 2
    assert target_env(JobSpec("e", ("x",), "m", 8, Target(TargetKind.EPOCHS, 1.5), dataset_samples=100), 45) == {
        "HEET_BATCH_SIZE": "8", "HEET_TARGET_EPOCHS": "1.5", "HEET_DATASET_SAMPLES": "100", "HEET_STOP_GRACE": "45"}


def _run(*exits: tuple[int | None, str | None], stop: str | None = None, profiling: bool = False) -> Run:
    ranks = {i: RankProc("h", rank_agent_id("j", i, "0123456789abcdef"), i, (i,), "exited", code, None, reason)
             for i, (code, reason) in enumerate(exits)}
    return Run("j", Allocation.of("j", "T4", {"h": list(range(len(exits)))}), 1, ranks, 0.0, profiling, stop)


def test_exit_verdicts() -> None:
    assert judge(_run((0, None), (0, None)))[0] is Outcome.DONE
    # a script that exits 0 on SIGTERM, short of its target: the user's cancel is what happened
    spec = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100))
    cancelled = _run((0, None), stop="cancel")
    cancelled.progress = {"step": 46, "samples": 1472}
    assert judge(cancelled, spec) == (Outcome.STOPPED, "cancel")
    cancelled.progress = {"step": 100, "samples": 3200}
    assert judge(cancelled, spec)[0] is Outcome.DONE, "it did finish, just as the cancel came"
    assert judge(_run((143, None), stop="resize"))[0] is Outcome.STOPPED
    # stopped by heet-tui past a target `update` lowered: it said "a rank failed while exiting" of ranks
    # that exited 143 on the stop
    lowered = _run((143, None), (143, None), stop="relaunch")
    lowered.progress = {"step": 1640, "samples": 52_480}
    assert judge(lowered, spec) == (Outcome.DONE, "target reached")
    died = _run((143, None), (None, "signal 6"))  # not stopped: a rank died on its way out
    died.progress = {"step": 1640, "samples": 52_480}
    died.ranks[1].exit_code = 134
    assert judge(died, spec) == (Outcome.DONE, "target reached (a rank failed while exiting)")
    assert judge(_run((None, "lost: x"), stop="host h lost"))[0] is Outcome.INTERRUPTED
    assert judge(_run((143, None)))[0] is Outcome.INTERRUPTED, "a SIGTERM from elsewhere is not a crash"
    assert "did not send" in judge(_run((143, None)))[1]
    inherited = _run((143, None))
    inherited.resize_inherited = True
    assert judge(inherited) == (Outcome.INTERRUPTED, "stopped for a resize the previous controller began before "
                                                     "it stopped"), "not blamed on someone else's SIGTERM"
    outcome, why = judge(_run((143, None), (5, None)))
    assert outcome is Outcome.CRASHED and "rank 1" in why and "exit code 5" in why
    outcome, why = judge(_run((127, "launch refused: checkpoint dir /c holds another store's checkpoints")))
    assert (outcome, why) == (Outcome.CRASHED, "rank 0 on h: launch refused: checkpoint dir /c holds another "
                                               "store's checkpoints"), "the agent's reason, not a bare exit code"
    assert judge(_run((0, None), profiling=True))[0] is Outcome.STOPPED
    assert parse_agent_id("my.job.r12") == ("my.job", "r", 12) and parse_agent_id("other") is None
    assert [backoff_s(n, 2.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0] and backoff_s(20, 2.0) == 300.0


def test_a_failure_is_blamed_on_the_rank_that_failed_not_on_the_peer_killed_after_it() -> None:
    """Seen over SSH: rank 1 raised ValueError and exited 1; rank 0, SIGTERMed in the cleanup,
    got the blame ("rank 0 on left ended with signal 15") and its "Connection closed by peer"
    was quoted as the reason."""
    from heet_tui.control.runtime import culprit

    peer_killed = _run((None, None), (1, None))
    peer_killed.ranks[0].signal = 15
    assert judge(peer_killed)[1] == "rank 1 on h ended with exit code 1"
    aborted = _run((None, None), (None, None), (None, None))
    aborted.ranks[0].signal, aborted.ranks[1].signal, aborted.ranks[2].signal = 15, 6, 9
    assert culprit(aborted.ranks.values()).rank == 1, "a signal of its own before SIGTERM, then the lowest rank"
    lost = _run((1, None), (None, "lost: host h2 is gone"))
    assert culprit(lost.ranks.values()).rank == 1, "the lost host's rank: its peer failed on the broken link"
    assert culprit(_run((0, None), (143, None)).ranks.values()) is None
    refused = _run((127, "launch refused: checkpoint dir /c: not a directory"), (None, "lost: not launched"))
    assert judge(refused) == (Outcome.CRASHED, "rank 0 on h: launch refused: checkpoint dir /c: not a directory"), \
        "the refusal, not the rank never launched after it"
    killed = _run((1, None), (None, None))  # rank 1 SIGKILLed by hand; rank 0 then failed on the reset link
    killed.ranks[1].signal, killed.ranks[1].ended_at, killed.ranks[0].ended_at = 9, 100.0, 100.4
    assert judge(killed)[1] == "rank 1 on h ended with signal 9"


def test_a_rank_dying_after_the_target_was_reported_is_done_not_a_crash() -> None:
    """gloo can abort a process (signal 6) on the way out after the last step was reported."""
    spec = _spec()  # target: 300 steps
    aborted = _run((0, None), (None, None))
    aborted.ranks[1].signal = 6
    aborted.progress = {"step": 300, "samples": 300 * 64}
    assert judge(aborted, spec)[0] is Outcome.DONE
    assert judge(aborted)[0] is Outcome.DONE, "rank 0 exited 0 anyway"
    aborted.ranks[0].exit_code, aborted.ranks[0].signal = None, 6
    assert judge(aborted, spec)[0] is Outcome.DONE
    assert judge(aborted)[0] is Outcome.CRASHED, "without the spec nothing says the target was met"
    aborted.progress = {"step": 299, "samples": 299 * 64}
    assert judge(aborted, spec)[0] is Outcome.CRASHED, "one step short is a crash"
    fenced = _run((3, None))
    fenced.progress = {"step": 300, "samples": 300 * 64}
    assert judge(fenced, spec)[0] is not Outcome.DONE, "a fenced stale copy never finishes the job"
    epochs = JobSpec("e", ("x",), "m", 10, Target(TargetKind.EPOCHS, 2), dataset_samples=100)
    assert reached_target(epochs, {"step": 20, "samples": 200}) and not reached_target(epochs, {"samples": 190})
    assert not reached_target(epochs, None) and not reached_target(epochs, {"samples": "x"})


def test_store_codec_round_trip(tmp_path: Path) -> None:
    from heet_tui.control.codec import plan_from_json, plan_to_json
    from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect

    a = Allocation.of("j", "T4", {"h": [0, 1]})
    plan = Plan.build({"j": Allocation.of("j", "A100", {"g": [0]})}, {"j": a}, "heet", 5.0,
                      PredictedEffect((JobPrediction("j", 1.0, 2.0, None, 30.0, after_spread=None),
                                       JobPrediction("k", 1.0, 2.0, 9.0, 0.0, after_spread=0.25,
                                                     placed_on="2xT4 on h[0,1]")), 10.0, None))
    assert plan_from_json(plan_to_json(plan)) == plan
    stored = json.loads(plan_to_json(plan))
    stored["effect"]["jobs"] = [row[:7] for row in stored["effect"]["jobs"]]  # a plan stored before spreads
    old = plan_from_json(json.dumps(stored))
    assert [p.after_spread for p in old.effect.jobs] == [0.0, 0.0], "read as not known, not guesses"
    assert [p.placed_on for p in old.effect.jobs] == [None, None]


def test_auto_approve_takes_a_plan_that_vacates_a_drained_host_whatever_it_gains() -> None:
    from heet_tui.control.planning import vacates
    from heet_tui.core.plan import Plan

    on_a, on_b = Allocation.of("j", "T4", {"a": [0]}), Allocation.of("j", "T4", {"b": [0]})
    move = Plan.build({"j": on_a}, {"j": on_b}, "heet", 0.0)
    assert vacates(move, {"a"}) and not vacates(move, {"b"}) and not vacates(move, set())
    assert not vacates(Plan.build({}, {"j": on_a}, "heet", 0.0), {"a"}), "a start vacates nothing"


def test_a_pending_plans_figures_are_remade_when_what_it_shows_is_no_longer_so() -> None:
    from heet_tui.control.planning import drifted
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    shown = PredictedEffect((JobPrediction("a", 551.0, 1233.0, 60.0, 5.0),
                             JobPrediction("w", 0.0, 0.0, None, 0.0, starts_in_s=30.0, starts_on="A100")))

    def now(**changes) -> PredictedEffect:
        return PredictedEffect((replace(shown.jobs[0], **changes), shown.jobs[1]))

    assert not drifted(shown, now(throughput_after=1200.0, completion_s=57.0)), "within 10%"
    assert drifted(shown, now(throughput_after=772.0)) and drifted(shown, now(throughput_before=700.0))
    assert drifted(shown, now(completion_s=50.0)), "it ran on meanwhile: less is left"
    assert drifted(shown, now(completion_s=None)) and not drifted(now(completion_s=None), now(completion_s=None))
    assert drifted(shown, PredictedEffect((shown.jobs[0], replace(shown.jobs[1], starts_in_s=20.0))))
    assert drifted(shown, PredictedEffect((shown.jobs[0],))), "a job left"
    assert drifted(shown, PredictedEffect((shown.jobs[0], replace(shown.jobs[1], starts_on="T4"))))
    assert not drifted(shown, shown)
    # the average counts from each job's submission: "average JCT 8s" was shown after 28 s of waiting
    timed = replace(shown, avg_jct_s=8.0, avg_jct_before_s=8.0)
    assert drifted(timed, replace(timed, avg_jct_s=36.0)) and drifted(timed, replace(timed, avg_jct_before_s=36.0))
    assert not drifted(timed, replace(timed, avg_jct_s=8.5))


def test_gpus_held_by_profiling_runs_are_not_given_out() -> None:
    # Seen with `run --auto-approve`: a plan started a job on a T4 another job was profiling
    # on, failed with "GPUs [0] of local-t4 are still in use", and six such plans followed.
    from heet_tui.control.planning import cluster_view
    from heet_tui.core.gpu import Gpu
    from heet_tui.core.host import HostState
    from heet_tui.core.sched_input import JobView
    from heet_tui.core.snapshot import HostStatus
    from heet_tui.scheduling import make_policy

    t4 = HostStatus("t", HostState.READY, gpus=tuple(Gpu(i, "T4") for i in range(4)))
    held = cluster_view((t4,), {"t": (0, 1, 2)}, set(), {"t": {0}})
    (view,) = held.hosts
    assert view.free == (1, 2)
    (whole,) = cluster_view((t4,), {"t": None}, set()).hosts
    assert whole.free == (0, 1, 2, 3)
    # The count is the host's, not the free GPUs': a count of 2 with GPU 2 free made every
    # plan fail ("free GPU indices [2] outside 0..1") for as long as GPU 0 was profiling.
    assert view.gpu_count == 4
    job = JobView("j", 2, 2, lambda t, p: 100.0 * sum(p), ("T4",), remaining_samples=1e6)
    plan = make_policy("heet").plan(held, [job], 0.0)
    assert plan.allocations["j"].hosts == (("t", (1, 2)),)
    upper = cluster_view((t4,), {"t": (2, 3)}, set())  # a hosts file's `gpus = [2, 3]`
    assert make_policy("heet").plan(upper, [job], 0.0).allocations["j"].hosts == (("t", (2, 3)),)


def test_an_exit_0_is_done_but_says_when_the_target_was_not_seen_reached() -> None:
    spec, ended = _spec(), _run((0, None))  # target: 300 steps
    job = Job("j", spec, JobState.RUNNING, 0.0)
    assert judge(ended, spec, job) == (Outcome.DONE, "exited 0 without reporting progress (no valid "
                                                     "@heet-progress line): counted done")
    assert judge(ended, spec, replace(job, steps_done=120, samples_done=120 * 64)) == (
        Outcome.DONE, "exited 0 at step 120, short of its target as last reported: counted done (heet-tui retry goes on from its "
        "checkpoint)")
    assert judge(ended, spec, replace(job, steps_done=300, samples_done=300 * 64)) == (Outcome.DONE, "target reached")


def test_rank_0_is_reached_at_loopback_on_one_host_and_at_its_resolved_name_across_hosts() -> None:
    """Seen over SSH: address = "node1" (an ~/.ssh/config alias) as MASTER_ADDR; the host could not
    resolve it and every job of two or more GPUs hung until the stall timeout."""
    hosts = {"a": HostEntry("a", "node1"), "b": HostEntry("b", "node2")}
    resolved = {"a": "10.0.0.11", "b": "10.0.0.12"}.get

    def master(alloc: dict[str, list[int]], address_of=resolved) -> set[str]:
        launches = plan_launch("cnn", _spec(), Allocation.of("cnn", "T4", alloc), 1, hosts, 29600,
                               address_of=address_of)
        return {dict(s.env)["MASTER_ADDR"] for s in launches}

    assert master({"a": [0, 1]}) == {"127.0.0.1"}
    assert master({"a": [0], "b": [0]}) == {"10.0.0.11"}, "the config's HostName, not the alias"
    assert master({"a": [0], "b": [0]}, None) == {"node1"}, "nothing resolved: the address as written"


def test_a_plan_marks_each_new_speed_with_how_sure_it_is() -> None:
    from heet_tui.control.planning import with_spreads
    from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect

    book = ThroughputBook()
    book.add("j", "T4", (1,), 30.0)
    book.add("k", "T4", (1,), 30.0)
    now = {"j": Allocation.of("j", "T4", {"h": [0]}), "k": Allocation.of("k", "T4", {"h": [1]})}
    grown = {"j": Allocation.of("j", "T4", {"h": [0, 2]}), "k": now["k"]}
    effect = PredictedEffect(tuple(JobPrediction(j, 30.0, book.estimate(j, "T4", a.placement), 10.0, 0.0)
                                   for j, a in grown.items()))
    marked = with_spreads(Plan.build(now, grown, "heet", 0.0, effect), book)
    assert {p.job_id: p.after_spread for p in marked.jobs} == {"j": None, "k": 0.0}, "2xT4 never ran: a guess"


def test_a_rejected_plans_shape_ignores_which_gpus_of_a_host_it_names() -> None:
    """A rejected plan came back twice, the same moves on other GPU indices of the same hosts."""
    from heet_tui.control.planning import shape, signature
    from heet_tui.core.plan import Plan

    def plan(a_gpus: list[int], b_type: str = "T4", b_gpus: tuple[int, ...] = (0, 1)) -> Plan:
        return Plan.build({}, {"a": Allocation.of("a", "A100", {"fast": a_gpus}),
                               "b": Allocation.of("b", b_type, {"slow": list(b_gpus)})}, "heet", 0.0)

    assert shape(plan([0])) == shape(plan([1])) and signature(plan([0])) != signature(plan([1]))
    assert shape(plan([0])) != shape(plan([0, 1])), "another count is another plan"
    assert shape(plan([0])) != shape(plan([0], b_gpus=(0,))), "so is another count of another job"

    # a shrink to one A100, rejected, is not the start of that job on one A100 once it was queued
    running = {"a": Allocation.of("a", "A100", {"fast": [0, 1, 2]})}
    target = {"a": Allocation.of("a", "A100", {"fast": [0]})}
    assert shape(Plan.build(running, target, "heet", 0.0)) != shape(Plan.build({}, target, "heet", 0.0))
    assert shape(Plan.build(running, target, "heet", 0.0)) == shape(
        Plan.build({"a": Allocation.of("a", "A100", {"fast": [1, 2, 3]})}, target, "heet", 0.0))




def test_a_jobs_fenced_ranks_are_one_notice() -> None:
    from heet_tui.control.recovery import fenced_notes

    ranks = [f"big.r{i}.4a146a78" for i in range(8)]
    (said,) = fenced_notes("a100-05", {("big", 3): ranks})
    assert said.startswith("fenced stale big generation 3 on a100-05 (8 processes: big.r0.4a146a78, big.r1")
    assert fenced_notes("h", {("cnn", 2): ["cnn.r0.4a146a78"]}) == ["fenced stale cnn.r0.4a146a78 generation 2 on h"]
