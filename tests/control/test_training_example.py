"""examples/training.py for real: SIGTERM at world 1, resume at world 2, steps and loss continue;
a stale generation is refused, and a new one claims the directory before it trains. (The emulated speed is checked end to end: tests/e2e.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from heet_tui.cluster.loopback_sshd import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "training.py"
PREFIX = "@heet-progress "


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "HEET_EMULATED_SPEED")}
    # CPU and gloo, also on a machine with one GPU: two unmasked ranks there would both pick it,
    # which nccl refuses (under the agent each rank sets its own device: the job's GPUs, its own at LOCAL_RANK).
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def _progress(text: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines() if line.startswith(PREFIX)]


def _run_until_sigterm(ckpt: Path, stop_after_step: int) -> tuple[int, list[dict]]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--steps", "1000", "--report-every", "5", "--checkpoint-every", "0",
         "--checkpoint-dir", str(ckpt)], stdout=subprocess.PIPE, text=True, env=_env())
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX):
            seen.append(json.loads(line[len(PREFIX):]))
            if seen[-1]["step"] >= stop_after_step:
                proc.send_signal(signal.SIGTERM)
                break
    rest, _ = proc.communicate(timeout=60)
    return proc.returncode, seen + _progress(rest)


def test_sigterm_checkpoint_then_resume_at_world_two(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    code, before = _run_until_sigterm(ckpt, 50)
    assert code == 143, "a graceful stop exits 143 after checkpointing"
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    stopped_at = meta["step"]
    assert stopped_at == before[-1]["step"] and before[-1]["checkpoint"] == str(ckpt / "checkpoint.pt")
    initial_loss, last_loss = before[0]["loss"], before[-1]["loss"]
    assert last_loss < initial_loss

    port, goal = free_port("127.0.0.1"), stopped_at + 10
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "--steps", str(goal), "--report-every", "2",
             "--checkpoint-dir", str(ckpt)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), HEET_GENERATION="1"))
        for r in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:]
    after = _progress(outs[0][0])
    assert not _progress(outs[1][0]), "only rank 0 reports progress"
    assert after[0]["step"] > stopped_at and after[0]["world_size"] == 2
    assert after[-1]["step"] == goal and after[-1]["samples"] == goal * 64
    # The loss carries on from where the world-1 run stopped instead of restarting near ln(10).
    assert after[0]["loss"] < initial_loss - 0.3 * (initial_loss - last_loss)
    assert json.loads((ckpt / "checkpoint.json").read_text()) | {"loss": 0} == {
        "step": goal, "samples": goal * 64, "loss": 0, "generation": 1}

    # A stale copy (generation 0, e.g. left running on a host that was lost) must not overwrite it.
    stale = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(goal + 2), "--checkpoint-dir", str(ckpt)],
                           env=_env(HEET_GENERATION="0"), capture_output=True, text=True, timeout=60)
    assert stale.returncode == 3 and "newer generation" in stale.stderr
    assert json.loads((ckpt / "checkpoint.json").read_text())["step"] == goal

    # A new generation with nothing left to train still claims the directory: the copy it replaced
    # (generation 1, maybe still running on a host the controller cannot reach) is fenced from now on.
    done = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(goal), "--checkpoint-dir", str(ckpt)],
                          env=_env(HEET_GENERATION="2"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((ckpt / "checkpoint.json").read_text()) | {"loss": 0} == {
        "step": goal, "samples": goal * 64, "loss": 0, "generation": 2}
    older = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(goal + 2), "--checkpoint-dir", str(ckpt)],
                           env=_env(HEET_GENERATION="1"), capture_output=True, text=True, timeout=60)
    assert older.returncode == 3 and "newer generation" in older.stderr


def _losses(world: int, steps: int) -> list[float]:
    port = free_port("127.0.0.1")
    procs = [subprocess.Popen(
        [sys.executable, str(SCRIPT), "--steps", str(steps), "--report-every", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port))) for r in range(world)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * world, outs[0][1][-2000:]
    return [p["loss"] for p in _progress(outs[0][0])]


def test_a_world_size_that_does_not_divide_the_batch_trains_the_same_model() -> None:
    """The scheduler may pick 3 GPUs for a batch of 64: the script refused it (exit 2, three
    times, and the job failed), although uneven slices with a rescaled loss give the same steps."""
    one, three = _losses(1, 6), _losses(3, 6)
    assert len(one) == len(three) == 3
    assert all(abs(a - b) < 1e-4 * a for a, b in zip(one, three, strict=True)), (one, three)
    assert three[-1] < three[0], "it trains"


def _rate(speed: str, hogs: int) -> float:
    """Mean reported samples/s over a short run at an emulated speed, with ``hogs`` busy processes alongside.

    The hogs start once the first window (warm-up, not counted) is reported: every window that
    counts is crowded, and torch's import is not slowed by them."""
    done = subprocess.Popen([sys.executable, str(SCRIPT), "--steps", "60", "--report-every", "10"],
                            env=_env(HEET_EMULATED_SPEED=speed), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    busy: list[subprocess.Popen] = []
    try:
        assert done.stdout is not None
        first = ""
        while not first.startswith(PREFIX) and (line := done.stdout.readline()):
            first = line
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        rest, err = done.communicate(timeout=120)
    finally:
        for p in [*busy, done]:
            p.kill()
            p.wait()
    assert done.returncode == 0, err[-2000:]
    reports = _progress(first + rest)  # lines before the first report are not progress
    assert reports and reports[0]["step"] == 10, first
    rates = [p["samples_per_s"] for p in reports][1:]  # the first window includes warm-up
    return sum(rates) / len(rates)


def test_emulated_speed_is_measured_whatever_else_uses_the_cores() -> None:
    """Emulated GPUs share this machine's cores: a fast one crowded by other processes must still
    measure about twice a half-speed one running alone (wall-clock timing would invert them)."""
    crowded_fast = _rate("1.0", hogs=3)
    alone_half = _rate("0.5", hogs=0)
    assert 1.4 < crowded_fast / alone_half < 3.2, (crowded_fast, alone_half)


def test_a_bad_environment_value_exits_2_as_documented() -> None:
    """docs/TRAINING.md: a bad input is printed and exits 2; a non-number batch size exited 1."""
    bad = subprocess.run([sys.executable, str(SCRIPT)], env=_env(HEET_BATCH_SIZE="abc"), capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "HEET_BATCH_SIZE='abc' is not a number" in bad.stderr, bad.stderr
