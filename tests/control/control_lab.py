"""Helpers for controller tests: local-transport hosts with emulated GPUs, jobs, and waiting on snapshots."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from heet_tui.core.job import JobState
from heet_tui.core.snapshot import Snapshot

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "examples" / "training.py"


def write_local_hosts(root: Path, hosts: list[tuple[str, str, int, float]]) -> Path:
    """``hosts``: (name, gpu type, count, speed); each gets its own agent workdir under ``root``."""
    lines = ["[defaults]", f'python = "{sys.executable}"', ""]
    for name, gpu_type, count, speed in hosts:
        lines += ["[[hosts]]", f'name = "{name}"', 'transport = "local"', f'workdir = "{root / ("w-" + name)}"',
                  f'emulate = {{ gpu_type = "{gpu_type}", count = {count}, speed = {speed} }}', ""]
    path = root / "hosts.toml"
    path.write_text("\n".join(lines))
    return path


def write_job(root: Path, name: str, steps: int, max_gpus: int = 2, batch: int = 32, every: int = 20,
              command: list[str] | None = None, extra: str = "", model: str | None = None,
              own_checkpoint_dir: bool = True) -> Path:
    """A job spec; its profile class is its own (``model`` = its name) unless ``model`` makes it a
    twin; without ``own_checkpoint_dir`` its checkpoints are under each host's workdir."""
    argv = command or ["python3", str(TRAINING), "--checkpoint-every", str(every), "--report-every", "5"]
    quoted = ", ".join(f'"{a}"' for a in argv)
    path = root / f"{name}.toml"
    checkpoints = f'checkpoint_dir = "{root / "ckpt" / name}"\n' if own_checkpoint_dir else ""
    path.write_text(
        f'name = "{name}"\ncommand = [{quoted}]\nenv = {{ OMP_NUM_THREADS = "1" }}\nmodel = "{model or name}"\n'
        f"batch_size = {batch}\ntarget = {{ steps = {steps} }}\nmin_gpus = 1\nmax_gpus = {max_gpus}\n"
        f"{checkpoints}{extra}")
    return path


async def running_past(ctl, spec: Path, name: str, step: int, timeout: float) -> str:
    """Submit ``spec`` and wait until job ``name`` runs past ``step``; the host of its rank 0."""
    from heet_tui.core.intents import SubmitJob

    await ctl.post(SubmitJob(str(spec)))
    snap = await wait_for(ctl, lambda s: job(s, name).state is JobState.RUNNING
                          and ctl.store.job(name).job.steps_done >= step, timeout, f"{name} past step {step}")
    return job(snap, name).allocation.host_names[0]


def training_with(root: Path, name: str, prelude: str) -> list[str]:
    """A command that runs ``prelude`` (Python, with os, sys and time imported), then
    examples/training.py with the arguments the command is given: a training script that
    misbehaves in one chosen way."""
    script = root / f"{name}.py"
    script.write_text(f"import os, runpy, sys, time\n{prelude}\nsys.argv = ['training.py', *sys.argv[1:]]\n"
                      f"runpy.run_path({str(TRAINING)!r}, run_name='__main__')\n")
    return [sys.executable, str(script), "--report-every", "5"]


def crashing_at(root: Path, name: str, step: int, switch: Path, *, say: str = "", once: bool = False,
                pace_s: float = 0.0) -> list[str]:
    """examples/training.py that exits 4 right after printing step ``step``'s progress line while
    the file ``switch`` exists (``once``: it removes the file, so only the first time), printing
    ``say`` first; ``pace_s`` after each progress line keeps the agent from folding lines together."""
    switch.write_text("on")
    return training_with(root, name, f"switch = {str(switch)!r}\n"
                         "import builtins\n_print = builtins.print\n"
                         "def print(*a, **k):\n"
                         "    _print(*a, **k)\n"
                         "    if not (a and '@heet-progress' in str(a[0])):\n"
                         "        return\n"
                         f"    time.sleep({pace_s!r})\n"
                         f"    if os.path.exists(switch) and '\"step\": {step},' in str(a[0]):\n"
                         f"        {'os.unlink(switch); ' if once else ''}_print({say!r}, flush=True); os._exit(4)\n"
                         "builtins.print = print")


def fast_retries(max_retries: int, **options):
    """Options of an auto-approving controller that retries a crashed job at once (0.3 s rounds)."""
    from heet_tui.control.controller import ControllerOptions
    from heet_tui.control.execution import ExecOptions

    return ControllerOptions(**({"interval_s": 0.3, "auto_approve": True, "profile": False} | options),
                             execution=ExecOptions(max_retries=max_retries, retry_backoff_s=0.2))


async def wait_for(ctl, predicate: Callable[[Snapshot], bool], timeout: float, what: str) -> Snapshot:
    """Poll published snapshots until ``predicate`` holds; fail with the last snapshot's jobs."""
    deadline = time.monotonic() + timeout
    snap = None
    while time.monotonic() < deadline:
        await ctl.publish()
        snap = ctl.hub.latest
        if snap is not None and predicate(snap):
            return snap
        await asyncio.sleep(0.3)
    jobs = [(j.id, j.state.value, j.message) for j in snap.jobs] if snap else None
    raise AssertionError(f"timed out waiting for {what}; jobs: {jobs}; notices: {snap.notices if snap else None}")


def job(snap: Snapshot, job_id: str):
    return next(j for j in snap.jobs if j.id == job_id)


def run_and_clean(scenario: Callable[[], Awaitable[None]], root: Path) -> None:
    """Run an async scenario; whatever it leaves running under the hosts' workdirs is killed."""
    try:
        asyncio.run(scenario())
    finally:
        kill_local_jobs(root)


def kill_local_jobs(root: Path) -> None:
    """Kill the jobs of the hosts ``write_local_hosts`` wrote under ``root`` (each its own workdir:
    ``kill_jobs_under(root)`` looked in none of them, and a job that trains on left a CPU busy)."""
    from support.sshd import kill_jobs_under

    for workdir in root.glob("w-*"):
        kill_jobs_under(workdir)


@contextlib.asynccontextmanager
async def started_controller(hosts, store, options) -> AsyncIterator:
    """A controller started with ``options`` (ControllerOptions), stopped on the way out."""
    from heet_tui.control.controller import Controller

    ctl = Controller(hosts, store, options)
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.stop()


@contextlib.asynccontextmanager
async def moved_by_a_drain(root: Path, store, spec: Path, name: str, step: int, timeout: float) -> AsyncIterator:
    """Two hosts of one A100 each and a controller that auto-approves: job ``name`` runs past
    ``step``, then its host is drained, so the next plan moves it to the other. Yields the
    controller and the drained host."""
    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import ControllerOptions
    from heet_tui.core.intents import DrainHost

    hosts = load_hosts(write_local_hosts(root, [("a", "A100", 1, 1.0), ("b", "A100", 1, 1.0)]))
    async with started_controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True,
                                                                  profile=False)) as ctl:
        first = await running_past(ctl, spec, name, step, timeout)
        await ctl.post(DrainHost(first))
        yield ctl, first


def manual_controller(hosts, store, **options):
    """A started controller that waits for plans to be approved, profiling nothing unless
    ``profile=True``."""
    from heet_tui.control.controller import ControllerOptions

    return started_controller(hosts, store, ControllerOptions(**({"interval_s": 0.3, "auto_approve": False,
                                                                  "profile": False} | options)))
