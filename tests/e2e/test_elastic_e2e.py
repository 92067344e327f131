"""End to end on three real loopback sshd hosts with emulated GPUs of different speeds.

Three jobs of examples/training.py are submitted, profiled, planned and approved through the
Backend API, and run. One job is resized (its host drained, the plan edited to one GPU) and
carries on from its checkpoint; one host's sshd is killed and the job there resumes on another
host from its checkpoint, the stale copy being fenced; then the in-process controller is
replaced by ``heet-tui run`` processes, the first of them SIGKILLed mid-run, and the second
adopts the job still running, relaunches it when ``heet-tui update`` lowers its target, and
finishes every job.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.e2e import FAST
from support.sshd import SshLab

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.job_update import UPDATED
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, DrainHost, EditJob, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.sched_input import Constraints

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "examples" / "training.py"
PREFIX = "@heet-progress "
# j3 is long enough to outlive phase one and the first `heet-tui run` on a fast, idle machine;
# once the second has adopted it, an update lowers its target (LOWERED_BY steps past where it is).
TARGETS = {"j1": 1200, "j2": 800, "j3": 6000}
LOWERED_BY = 800
MAX_GPUS = {"j1": 2, "j2": 1, "j3": 1}

pytestmark = pytest.mark.slow


def _job_toml(root: Path, name: str, steps: int, max_gpus: int) -> Path:
    path = root / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\ncommand = ["python3", "{TRAINING}", "--checkpoint-every", "50", "--report-every", "5"]\n'
        f'env = {{ OMP_NUM_THREADS = "1" }}\nmodel = "cifar10"\nbatch_size = 32\ntarget = {{ steps = {steps} }}\n'
        f'min_gpus = 1\nmax_gpus = {max_gpus}\ncheckpoint_dir = "{root / "ckpt" / name}"\n')
    return path


def _progress(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line[len(PREFIX):]) for line in log.read_text().splitlines() if line.startswith(PREFIX)]


async def _until(ctl: Controller, predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await ctl.publish()
        snap = ctl.hub.latest
        if snap is not None and predicate(snap):
            return snap
        await asyncio.sleep(0.25)
    snap = ctl.hub.latest
    raise AssertionError(f"timed out waiting for {what}: {[(j.id, j.state.value, j.message) for j in snap.jobs]}"
                         f" notices={snap.notices[-5:]}")


def _job(snap, job_id: str):
    return next(j for j in snap.jobs if j.id == job_id)


async def _approve(ctl: Controller, predicate, timeout: float, what: str) -> int:
    """Approve the first pending plan that satisfies ``predicate`` (a plan may be superseded meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        snap = await _until(ctl, lambda s: s.plan is not None and predicate(s), max(1.0, deadline - time.monotonic()),
                            what)
        try:
            await ctl.post(ApprovePlan(snap.plan_id))
            return snap.plan_id
        except ValueError:
            if time.monotonic() > deadline:
                raise


def _dump(store: Store) -> None:
    """On failure, the controller's story (pytest shows it with the assertion)."""
    events = store.events(limit=1000)
    t0 = events[0].at if events else 0.0
    for e in events:
        print(f"{e.at - t0:7.1f} {e.kind:<11} {e.job_id or '-':<4} {e.message[:160]!r}")


def _wait_store(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _adopted_by_latest(store: Store, job_id: str, starts: int) -> bool:
    """Whether the controller started after the first ``starts`` has adopted the job."""
    events = sorted(store.events(limit=1000), key=lambda e: e.at)
    latest = [i for i, e in enumerate(events) if e.kind == "controller"][starts:]
    return bool(latest) and any(e.kind == "adopt" and e.job_id == job_id for e in events[latest[0]:])


def _log(server, job_id: str, generation: int) -> Path:
    """Rank 0's log of one generation (the agent keeps logs under its own workdir)."""
    found = sorted(server.workdir.glob(f"**/logs/{job_id}.r0.*-g{generation}.log"))
    assert found, f"no log of {job_id} generation {generation} under {server.workdir}"
    return found[0]


def test_three_hosts_profile_plan_resize_lose_host_and_kill_controller(lab: SshLab, tmp_path: Path) -> None:
    servers = [lab.add_host(n) for n in ("h-a100", "h-v100", "h-t4")]
    kinds = {"h-a100": ("A100", 1.0), "h-v100": ("V100", 0.7), "h-t4": ("T4", 0.45)}
    hosts_path = lab.hosts_toml([lab.entry_for(s, emulate={"gpu_type": kinds[s.name][0], "count": 4,
                                                           "speed": kinds[s.name][1]}) for s in servers],
                                python=sys.executable)
    hosts = load_hosts(hosts_path)
    state = tmp_path / "state"
    store = Store(state)
    by_name = {s.name: s for s in servers}
    # The killed host stays away far longer than the grace period, so its job is lost and moves.
    options = ControllerOptions(interval_s=0.5, cluster=FAST, execution=ExecOptions(stop_grace_s=20),
                                host_loss_grace_s=3.0)

    async def phase_one() -> dict:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            for name, steps in TARGETS.items():
                await ctl.post(SubmitJob(str(_job_toml(tmp_path, name, steps, MAX_GPUS[name]))))
            await _approve(ctl, lambda s: {c.job_id for c in s.plan.changes} == set(TARGETS), 90,
                           "a plan starting all three jobs")
            snap = await _until(ctl, lambda s: all(_job(s, j).state is JobState.RUNNING for j in TARGETS)
                                and store.job("j1").job.steps_done >= 80, 90, "all running, j1 past step 80")
            # one sweep (cifar10, batch 32): profiled once, through one of its jobs (the other two
            # used to get idle-GPU runs of their own for the same cells)
            profiled = {j for j in TARGETS if "profiling" in {o[5] for o in store.observations(j)}}
            assert len(profiled) == 1, f"profiling runs of {sorted(profiled)}"
            rates: dict[str, list[float]] = {}
            for o in store.observations():
                if o[5] == "profiling":
                    rates.setdefault(o[1], []).append(o[3])
            fast, slow = (sum(rates[t]) / len(rates[t]) for t in ("A100", "T4"))
            assert fast > slow, f"an emulated A100 (speed 1.0) outpaces a T4 (0.45): {rates}"
            j1_host = _job(snap, "j1").allocation.host_names[0]
            j1_gen, j1_world = store.job("j1").generation, _job(snap, "j1").allocation.num_gpus

            # Resize: drain j1's host, then edit the proposed move down to one GPU.
            await ctl.post(DrainHost(j1_host))
            snap = await _until(ctl, lambda s: s.plan is not None and any(c.job_id == "j1" for c in s.plan.changes),
                                30, "a plan moving j1 off its drained host")
            await ctl.post(EditJob(snap.plan_id, "j1", Constraints(fixed_count=1)))
            await _approve(ctl, lambda s: s.plan.allocations.get("j1") is not None
                           and s.plan.allocations["j1"].num_gpus == 1, 30, "the edited plan")
            snap = await _until(ctl, lambda s: _job(s, "j1").state is JobState.RUNNING
                                and _job(s, "j1").allocation.num_gpus == 1 and _job(s, "j1").throughput > 0, 60,
                                "j1 resized to one GPU and reporting")
            resized = {"host": j1_host, "gen": j1_gen, "world": j1_world, "new_gen": store.job("j1").generation,
                       "new_host": _job(snap, "j1").allocation.host_names[0]}
            await ctl.post(DrainHost(j1_host, drained=False))

            # Lose a host: kill the sshd where j3 runs; j3 resumes elsewhere from its checkpoint.
            await _until(ctl, lambda s: store.job("j3").checkpoint is not None, 60, "j3 checkpointed")
            snap = ctl.hub.latest
            lost = _job(snap, "j3").allocation.host_names[0]
            lost_gen = store.job("j3").generation
            by_name[lost].kill()
            await _until(ctl, lambda s: _job(s, "j3").state is not JobState.RUNNING
                         or store.job("j3").generation != lost_gen, 30, "j3 interrupted")
            await _approve(ctl, lambda s: "j3" in s.plan.allocations
                           and lost not in s.plan.allocations["j3"].host_names, 60, "a plan restarting j3")
            await _until(ctl, lambda s: _job(s, "j3").state is JobState.RUNNING and _job(s, "j3").throughput > 0,
                         60, "j3 running again")
            moved = {"host": lost, "gen": lost_gen, "new_gen": store.job("j3").generation,
                     "new_host": _job(ctl.hub.latest, "j3").allocation.host_names[0]}
            by_name[lost].start()  # the host comes back: its agent's stale j3 must not keep training
            return {"resized": resized, "moved": moved}
        finally:
            await ctl.stop()  # the processes keep running on their hosts

    try:
        facts = asyncio.run(phase_one())
    except BaseException:
        _dump(store)
        raise
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cli = [sys.executable, "-m", "heet_tui.cli.main", "--hosts", str(hosts_path), "--state", str(state), "run",
           "--auto-approve", "--interval", "0.5"]
    first = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    starts = sum(e.kind == "controller" for e in store.events(limit=1000))
    _wait_store(lambda: sum(e.kind == "controller" for e in Store(state).events(limit=1000)) > starts, 60,
                "the first `heet-tui run` to take over")
    time.sleep(2)  # mid-round
    first.send_signal(signal.SIGKILL)  # no clean shutdown: the store and the agents must suffice
    first.wait(timeout=10)
    alive = [r.job.id for r in Store(state).jobs(include_terminal=False)]
    assert alive, "some job was still running when the controller was killed"
    starts = sum(e.kind == "controller" for e in Store(state).events(limit=1000))
    second = subprocess.Popen([*cli, "--until-idle"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)
    try:
        _wait_store(lambda: _adopted_by_latest(Store(state), "j3", starts), 60, "the second run to adopt j3")
        targets = dict(TARGETS, j3=Store(state).job("j3").job.steps_done + LOWERED_BY)
        update = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "--state", str(state), "update",
                                 str(_job_toml(tmp_path, "j3", targets["j3"], MAX_GPUS["j3"]))],
                                capture_output=True, text=True, env=env, timeout=60)
        assert update.returncode == 0, update.stdout + update.stderr
        out, _ = second.communicate(timeout=150)
    finally:
        second.kill()
    if second.returncode != 0:
        _dump(store)
    assert second.returncode == 0, out[-3000:]

    final = Store(state)
    j3_events = final.events(job_id="j3", limit=1000)
    assert any(e.kind == "stopped" and UPDATED in e.message for e in j3_events), \
        "the running j3 was relaunched for its new target"
    assert not any("resumed behind" in e.message for e in j3_events), "from its checkpoint"
    assert [r.job.id for r in final.jobs()] == list(TARGETS), "an update keeps the job: no new one"
    for name, steps in targets.items():
        rec = final.job(name)
        assert rec.job.state is JobState.DONE, (name, rec.job.message)
        meta = json.loads((tmp_path / "ckpt" / name / "checkpoint.json").read_text())
        assert meta["step"] == steps and meta["generation"] == rec.generation
        gens = [e.message.split()[2].rstrip(":") for e in final.events(job_id=name, limit=1000) if e.kind == "launch"]
        assert len(gens) == len(set(gens)), f"{name}: a generation was launched twice: {gens}"

    # The logs, read once everything has finished: the resize and the move resumed from checkpoints.
    r, m = facts["resized"], facts["moved"]
    before = _progress(_log(by_name[r["host"]], "j1", r["gen"]))
    after = _progress(_log(by_name[r["new_host"]], "j1", r["new_gen"]))
    assert before[0]["world_size"] == r["world"] and after[0]["world_size"] == 1
    assert 50 <= after[0]["step"] <= before[-1]["step"] + 5, "j1 resumed from its checkpoint"
    assert after[0]["loss"] < before[0]["loss"] * 0.8, "j1's loss carried on"
    resumed = _progress(_log(by_name[m["new_host"]], "j3", m["new_gen"]))
    assert resumed[0]["step"] >= 50, "j3 resumed on another host from its checkpoint"
    stale = _progress(_log(by_name[m["host"]], "j3", m["gen"]))
    assert not stale or stale[-1]["step"] < targets["j3"], "the stale copy of j3 never finished the job"
