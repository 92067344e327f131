"""What the user fixes for a job on the Plan screen (`e`) lasts through later plans, shows with
the job, is taken back when the plan made for it is rejected, and is dropped on request.

Before, the edit was kept for good and shown nowhere: a job tweaked onto T4s in a plan the
user then rejected was put on the T4s by every later plan, cancelled and retried included,
while the A100s stood idle."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.store import Store
from heet_tui.control.user_constraints import PendingEdits, user_constraints
from heet_tui.core.intents import DropEdit, EditJob, RejectPlan, SubmitJob
from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import Constraints

T4 = Constraints(pinned_type="T4")
EMPTY = Plan({}, ())


def test_an_edit_is_taken_back_by_a_reject_unless_a_plan_made_since_was_approved(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    edits = PendingEdits(store)
    first = store.add_plan(EMPTY)
    assert edits.edit("a", T4, first) == Constraints()
    edits.edit("a", Constraints(pinned_type="T4", fixed_count=2), store.add_plan(EMPTY))
    edits.edit("b", Constraints(held=True), store.add_plan(EMPTY))
    assert edits.undo() == {"a": Constraints(pinned_type="T4", fixed_count=2), "b": Constraints(held=True)}
    assert user_constraints(store) == {}, "both back to what they had before the first edit"

    edits.edit("a", T4, store.add_plan(EMPTY))
    edits.commit()  # the plan with it was approved
    edited = store.add_plan(EMPTY)
    edits.edit("a", Constraints(fixed_count=1), edited)
    assert edits.undo() == {"a": Constraints(fixed_count=1)}
    assert user_constraints(store) == {"a": T4}, "the approved edit stays; the rejected one goes"

    later = store.add_plan(EMPTY)
    edits.edit("b", Constraints(fixed_count=2), later)
    store.set_plan_status(later, "approved", 1.0)  # as auto-approve does at the next round
    assert edits.undo() == {} and user_constraints(store)["b"] == Constraints(fixed_count=2)
    assert edits.drop("b") == Constraints(fixed_count=2) and "b" not in user_constraints(store)


def test_an_edit_shows_with_the_job_a_reject_takes_it_back_and_a_drop_frees_the_job(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            said = await ctl.post(EditJob(first.plan_id, "a", T4))
            snap = ctl.hub.latest
            assert said.startswith(f"plan #{snap.plan_id} re-evaluated") and snap.plan.allocations["a"].gpu_type == "T4"
            assert job(snap, "a").edit == T4, "the job carries its edit to every screen"
            assert main(["--state", str(tmp_path / "state"), "jobs", "a"]) == 0
            assert "your edit  T4 only (fixed on the Plan screen" in capsys.readouterr().out

            said = await ctl.post(RejectPlan(snap.plan_id))
            assert "your edit(s) to a taken back" in said
            # said as it is: the plan made without the edit comes next ("it is not proposed again unless
            # something changes" read as if nothing would, and the next plan came a second later)
            assert "the plan made without them is proposed next" in said and "not proposed again" not in said, said
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan made without the edit")
            assert job(snap, "a").edit == Constraints() and user_constraints(store) == {}

            await ctl.post(EditJob(snap.plan_id, "a", Constraints(pinned_type="T4", fixed_count=1)))
            with pytest.raises(ValueError, match="b has no edit to drop"):
                await ctl.post(DropEdit("b"))
            assert await ctl.post(DropEdit("a")) == ("a: edit dropped (T4 only, 1 GPU(s)); plans place it freely "
                                                     "again")
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and job(s, "a").edit == Constraints(), 30,
                                  "a plan made without the edit")
            assert user_constraints(store) == {}
        kinds = [(e.kind, e.message) for e in store.events("a", limit=50)]
        assert any(k == "update" and "edited on the Plan screen (plan #" in m and "): T4 only; plans keep to it" in m
                   for k, m in kinds)
        assert any(k == "update" and "taken back with plan #" in m for k, m in kinds)

    asyncio.run(scenario())


def test_an_edit_pinning_a_type_no_ready_host_has_sets_its_job_aside_and_the_rest_are_planned(
        tmp_path: Path) -> None:
    """Seen: a job tweaked onto T4s, whose T4 host was then removed, made every plan fail ("pinned
    GPU type 'T4' is not in the cluster") round after round: a new job sat beside two idle A100s."""
    from heet_tui.control.user_constraints import set_user_constraints

    hosts = load_hosts(write_local_hosts(tmp_path, [("a", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "pinned", steps=2000, max_gpus=1))))
            set_user_constraints(store, "pinned", T4)  # as the tweak left it, its T4 host since removed
            await ctl.post(SubmitJob(str(write_job(tmp_path, "free", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan is not None and "free" in s.plan.allocations, 60,
                                  "a plan for the other job")
            assert "pinned" not in snap.plan.allocations
            assert not any("planning:" in n for n in snap.notices), snap.notices
            snap = await wait_for(ctl, lambda s: "no ready host has now" in job(s, "pinned").message, 30,
                                  "the pinned job saying why it waits")
            assert job(snap, "pinned").message == ("left queued: your edit pins it to T4, which no ready host has now; "
                                                   "it waits for it (d on the Jobs screen drops the edit)")

    asyncio.run(scenario())


def test_a_tweak_made_on_a_plan_superseded_meanwhile_applies_to_the_pending_one(tmp_path: Path) -> None:
    """Seen while jobs were profiling: a new plan came while the tweak dialog was open, and Apply was
    refused ("plan #1 is superseded, not pending"), the dialog's input lost."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50))))
            first = (await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")).plan_id
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=50))))
            await wait_for(ctl, lambda s: s.plan_id not in (None, first), 30, "a newer plan")
            said = await ctl.post(EditJob(first, "a", T4))
            snap = ctl.hub.latest
            assert said.startswith(f"plan #{snap.plan_id} re-evaluated") and snap.plan_id != first
            assert snap.plan.allocations["a"].gpu_type == "T4" and user_constraints(store) == {"a": T4}

    asyncio.run(scenario())


def test_a_cancel_from_the_tui_is_an_event_of_the_job_once(tmp_path: Path) -> None:
    """heet-tui cancel recorded one; x in the TUI did not, and the job's events never said so."""
    from heet_tui.core.intents import CancelJob

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50, max_gpus=1))))
            assert await ctl.post(CancelJob("a")) == "cancelled a"
            assert await ctl.post(CancelJob("a")) == "a is already cancelled"

    asyncio.run(scenario())
    assert [e.message for e in store.events("a", limit=20) if e.kind == "cancel"] == ["cancel requested for a"]


def test_a_warning_at_submit_from_the_tui_is_kept_with_the_job(tmp_path: Path) -> None:
    """It was in a toast only: a newcomer missed it, and the job failed with no word of why."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    spec = tmp_path / "first.toml"
    spec.write_text('name = "first"\ncommand = ["python3", "train.py"]\nmodel = "m"\nbatch_size = 8\n'
                    "target = { steps = 10 }\n")

    async def scenario() -> str:
        async with manual_controller(hosts, store) as ctl:
            return await ctl.post(SubmitJob(str(spec)))

    said = asyncio.run(scenario())
    assert '"train.py" is not beside first.toml' in said
    (kept,) = [e.message for e in store.events("first", limit=20) if e.kind == "warning"]
    assert kept.startswith('at submit: "train.py" is not beside first.toml') and kept[len("at submit: "):] in said


def test_an_edit_cannot_put_a_job_on_a_type_its_spec_leaves_out_and_an_old_one_sets_it_aside(
        tmp_path: Path) -> None:
    """Seen: a T4-only job tweaked onto the A100 host was started there. An edit made before its
    spec was narrowed (``heet-tui update``) must not stop the other jobs being planned either."""
    from heet_tui.control.user_constraints import set_user_constraints

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    a100 = Constraints(pinned_type="A100")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "t4only", steps=2000, max_gpus=1,
                                                   extra='gpu_types = ["T4"]\n'))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            assert next(j for j in snap.jobs if j.id == "t4only").gpu_types == ("T4",), "what the dialog offers"
            with pytest.raises(ValueError, match="pinned GPU type 'A100' is not one its spec allows"):
                await ctl.post(EditJob(snap.plan_id, "t4only", a100))
            assert user_constraints(store) == {}
            with pytest.raises(ValueError, match="not one its spec allows"):
                await ctl.preview(EditJob(snap.plan_id, "t4only", a100))

            set_user_constraints(store, "t4only", a100)  # made before the spec said T4 only
            await ctl.post(SubmitJob(str(write_job(tmp_path, "free", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan is not None and "free" in s.plan.allocations
                                  and "t4only" not in s.plan.allocations, 60, "a plan for the other job")
            assert not any("planning:" in n for n in snap.notices), snap.notices
            snap = await wait_for(ctl, lambda s: "leaves out" in job(s, "t4only").message, 30, "why it waits")
            assert job(snap, "t4only").message == (
                "left queued: your edit pins it to A100, which its spec leaves out (gpu_types: T4); "
                "it waits for it (d on the Jobs screen drops the edit)")
            set_user_constraints(store, "t4only", Constraints(pinned_hosts=("fast",)))  # the A100 host
            snap = await wait_for(ctl, lambda s: "whose GPUs" in job(s, "t4only").message, 30, "why it waits")
            assert job(snap, "t4only").message.startswith(
                "left queued: your edit pins it to fast (A100), whose GPUs its spec leaves out")
            with pytest.raises(ValueError, match=r"pinned hosts fast \(A100\) have no GPU type it may use \(T4\)"):
                await ctl.post(EditJob(snap.plan_id or 0, "t4only", Constraints(pinned_hosts=("fast",))))

    asyncio.run(scenario())


def test_an_edit_with_no_plan_pending_proposes_one(tmp_path: Path) -> None:
    """Seen: a job held for faster GPUs, the T4s idle, no plan pending: nothing on the Plan screen
    could start it ("p" planned the same again), and an edit needed a pending plan."""
    from heet_tui.core.intents import ApprovePlan

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, every=1000))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and "a" in s.plan.allocations, 30, "a plan")
            assert snap.plan.allocations["a"].num_gpus == 2
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: s.plan_id is None and job(s, "a").allocation is not None, 60, "a running")
            said = await ctl.post(EditJob(0, "a", Constraints(fixed_count=1)))
            snap = ctl.hub.latest
            assert said.startswith(f"plan #{snap.plan_id} re-evaluated with the edit to a")
            assert snap.plan.allocations["a"].num_gpus == 1

    run_and_clean(scenario, tmp_path)  # a trains on past the test


def test_an_edit_no_ready_host_can_hold_is_refused_saying_why(tmp_path: Path) -> None:
    """Two GPUs pinned to a host with one were taken: the plan gave the job nothing, "No plan
    pending", and the job waited for good saying the free GPUs went to no job."""
    from heet_tui.control.edit_room import too_big_for_the_cluster

    ready = [("t4-box", "T4", 1), ("v1", "V100", 2), ("v2", "V100", 2)]
    assert too_big_for_the_cluster(Constraints(fixed_count=2, pinned_hosts=("t4-box",)), 1, (), ready) == (
        "2 GPU(s) cannot be given: t4-box has at most 1 GPU(s) of one type (1xT4)")
    assert too_big_for_the_cluster(Constraints(fixed_count=4), 1, (), ready) is None, "4 V100s over two hosts"
    assert too_big_for_the_cluster(Constraints(fixed_count=2), 1, ("T4",), ready) is not None, "the spec's types"
    assert too_big_for_the_cluster(Constraints(pinned_type="A100"), 1, (), ready) is None, "said by the plan's check"
    assert too_big_for_the_cluster(Constraints(fixed_count=2, pinned_hosts=("gone",)), 1, (), ready) is None, \
        "a host not ready now may come back"
    assert too_big_for_the_cluster(Constraints(held=True), 8, (), ready) is None

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50, max_gpus=2))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            too_big = Constraints(fixed_count=2, pinned_hosts=("slow",))
            with pytest.raises(ValueError, match=r"^2 GPU\(s\) cannot be given: slow has at most 1 GPU"):
                await ctl.preview(EditJob(first.plan_id, "a", too_big))
            with pytest.raises(ValueError, match="slow has at most 1 GPU"):
                await ctl.post(EditJob(first.plan_id, "a", too_big))
            assert user_constraints(store) == {}, "nothing kept of it"
            said = await ctl.post(EditJob(first.plan_id, "a", Constraints(fixed_count=2, pinned_hosts=("fast",))))
            assert "re-evaluated" in said

    run_and_clean(scenario, tmp_path)


def test_a_tweaks_preview_says_where_the_plan_would_put_the_job(tmp_path: Path) -> None:
    """A tweak that left the type or hosts to the policy previewed a speed and a completion but not
    on which GPUs: the user approved it without knowing where the job would go."""
    from heet_tui.ui.dialogs.tweak import describe_effect

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 2, 4.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=2))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            proposed = snap.plan.effect.for_job("a")
            assert proposed is not None and proposed.placed_on == snap.plan.allocations["a"].describe()
            effect = await ctl.preview(EditJob(snap.plan_id, "a", Constraints(fixed_count=2)))
            assert effect.for_job("a").placed_on == "2xT4 on slow[0,1]", "the only place two GPUs fit"
            text = describe_effect(effect, "a", snap.plan.effect)
            if proposed.placed_on != "2xT4 on slow[0,1]":
                assert f"on 2xT4 on slow[0,1] (proposed: {proposed.placed_on})" in text
            else:
                assert "on 2xT4 on slow[0,1]\n" in text
            held = await ctl.preview(EditJob(snap.plan_id, "a", Constraints(held=True)))
            assert held.for_job("a").placed_on is None

    run_and_clean(scenario, tmp_path)


def test_an_edit_pinning_a_job_to_drained_hosts_only_is_refused_saying_so(tmp_path: Path) -> None:
    """The job waited for good, and every message gave another reason: "no GPUs, so no completion
    to count", "approve it to apply" with nothing pending, "left out by the policy"."""
    from heet_tui.core.intents import DrainHost

    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(DrainHost("fast", True))
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50, max_gpus=2))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            pinned = Constraints(pinned_hosts=("fast",))
            with pytest.raises(ValueError, match=r"^fast is drained: no plan places a job there \(undrain it"):
                await ctl.preview(EditJob(first.plan_id, "a", pinned))
            with pytest.raises(ValueError, match="fast is drained"):
                await ctl.post(EditJob(first.plan_id, "a", pinned))
            assert user_constraints(store) == {}, "nothing kept of it"
            said = await ctl.post(EditJob(first.plan_id, "a", Constraints(pinned_hosts=("fast", "slow"))))
            assert "re-evaluated" in said, "a drained host beside one that is not: the job goes there"

    run_and_clean(scenario, tmp_path)
