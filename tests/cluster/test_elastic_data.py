"""heet_agent.elastic and the data a step reads: the batch sampler across resizes, DataLoader
workers and a stop, a step waiting on its data, an iterable dataset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from elastic_support import PREFIX, SCRIPT, progress_of, script_env


def _indices_by_step(monkeypatch, world: int, first_step: int, steps: int) -> dict[int, list[int]]:
    """Every rank's sampler of a launch that resumed at ``first_step``, concatenated in rank order."""
    from heet_agent.elastic import ElasticRun

    by_step: dict[int, list[int]] = {}
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        run = ElasticRun(10, first_step + steps, None, 0, None, 1, None, "t")
        run.step, run.samples = first_step, first_step * 10  # as resume() leaves them
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(25)),
                                             batch_sampler=run.batch_sampler(25, seed=3))
        assert len(loader) == steps
        for k, (ids,) in enumerate(loader):
            by_step.setdefault(first_step + k, []).extend(ids.tolist())
    return by_step


def test_the_batch_sampler_reads_the_same_samples_at_any_size_after_a_resume(monkeypatch):
    """A DataLoader with a DistributedSampler deals each epoch out by world size and starts every
    launch at the epoch's start: after a resize from 1 GPU to 3 the job trained on other samples."""
    alone = _indices_by_step(monkeypatch, 1, 0, 8)
    resized = _indices_by_step(monkeypatch, 3, 3, 5)
    assert resized == {s: alone[s] for s in range(3, 8)}
    positions = [i for s in range(8) for i in alone[s]]
    assert sorted(positions[:25]) == sorted(positions[25:50]) == list(range(25)), "epochs of 25 samples"
    assert positions[:25] != positions[25:50] != list(range(25)), "each epoch shuffled anew"


def test_a_loader_made_before_resume_starts_where_the_run_resumed(monkeypatch):
    """A loader built above ``run.resume()`` started every relaunch at sample 0: 2,118 of 3,000
    steps trained on other data than an uninterrupted run, with "target reached" and no word."""
    from heet_agent.elastic import ElasticRun

    alone = _indices_by_step(monkeypatch, 1, 0, 8)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    run = ElasticRun(10, 8, None, 0, None, 1, None, "t")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(25)),
                                         batch_sampler=run.batch_sampler(25, seed=3))
    run.step, run.samples = 3, 30  # as resume() leaves them, after the loader was made
    assert len(loader) == 5
    assert {3 + k: ids.tolist() for k, (ids,) in enumerate(loader)} == {s: alone[s] for s in range(3, 8)}


LOADER_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "loader_training.py"


def test_a_stop_signalled_to_the_whole_process_group_saves_despite_dataloader_workers(tmp_path):
    """examples/loader_training.py, a DataLoader with a worker process. The agent stops a job with SIGTERM to its process group. A plain DataLoader's workers died
    of it and the main process raised "DataLoader worker ... killed by signal: Terminated" from
    inside its step (exit 1, no checkpoint: a resize lost 600 steps of a job on the local config)."""
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, str(LOADER_EXAMPLE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="1000000", HEET_CHECKPOINT_DIR=str(ckpt)))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX) and json.loads(line[len(PREFIX):])["step"] >= 20:
            os.killpg(proc.pid, signal.SIGTERM)
            break
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    last = progress_of(rest)[-1]
    assert json.loads((ckpt / "checkpoint.json").read_text())["step"] == last["step"] > 20
    assert last["checkpoint"] == str(ckpt / "checkpoint.pt")


def test_an_iterable_dataset_is_refused_by_name(monkeypatch):
    from heet_agent.elastic import ElasticError, ElasticRun

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10))

    monkeypatch.setenv("HEET_BATCH_SIZE", "4")
    monkeypatch.setenv("HEET_TARGET_STEPS", "3")
    with pytest.raises(ElasticError, match="needs a dataset with a length"):
        ElasticRun(None, None, None, 0, None, 1, None, "t").data_loader(Stream())


DATA_BOUND = """
import time
import torch
from torch.utils.data import Dataset
from heet_agent import elastic


class SlowReads(Dataset):  # 4 ms a sample: a batch of 8 takes ~32 ms to load whatever the GPU
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.ones(4)


run = elastic.start(report_every=5)
model = torch.nn.Linear(4, 1)
for x in run.data_loader(SlowReads(), num_workers=1):
    model(x).sum().backward()
    run.step_done()
    if not run.running:
        break
run.exit()
"""


def test_an_emulated_gpu_counts_the_time_a_step_waits_for_its_data(tmp_path):
    """A job bound by its DataLoader is as slow on a fast GPU: with the CPU time of the main process
    alone, such a job reported 20-60x the samples/s it trained at, and plans and ETAs believed it."""
    script = tmp_path / "slow_reads.py"
    script.write_text(DATA_BOUND)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="20", HEET_EMULATED_SPEED="4.0"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rates = [p["samples_per_s"] for p in progress_of(proc.stdout)[1:]]  # the first window starts the workers
    assert len(rates) == 3
    # the loader delivers 8 / 0.032 = 250 samples/s, and a 4x GPU does not read faster (it had
    # reported ~27,000: the main process's CPU time / 4)
    assert all(rate < 2 * 8 / 0.032 for rate in rates), rates


def test_a_run_that_reaches_its_target_exits_though_its_loader_workers_ignore_sigterm(tmp_path):
    """docs/TRAINING.md's hand-built DataLoader (worker_init_fn=elastic.ignore_sigterm) with
    persistent_workers: Python's exit sent the workers SIGTERM and waited for them forever; the
    job reached its target and its process never ended."""
    script = tmp_path / "loader.py"
    script.write_text(SCRIPT.replace("while run.running:", (
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(list(range(64)), batch_size=8, num_workers=1, persistent_workers=True,\n"
        "                    worker_init_fn=elastic.ignore_sigterm)\n"
        "for _ in loader:\n"
        "    pass\n"
        "while run.running:")).replace("run.exit()", "print('fell off the end', file=sys.stderr, flush=True)"))
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                              env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"), start_new_session=True)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-f", str(script)], check=False)
        raise AssertionError("the run reached its target and did not exit") from None
    assert done.returncode == 0 and "fell off the end" in done.stderr, done.stderr[-2000:]
    assert "killed by signal" not in done.stderr


def test_a_tiny_loss_is_reported_to_its_significant_digits(capsys) -> None:
    """round(loss, 5) made a converged 3e-6 a reported loss of 0: jobs could not be compared by it."""
    import json
    import time

    from heet_agent.elastic import PREFIX, ElasticRun

    run = object.__new__(ElasticRun)  # the reporting alone: no process group, no model
    run.step, run.samples, run.loss, run.dataset_samples = 10, 80, 3.21e-6, None
    run.emulated_speed, run.checkpoint, run.checkpoint_s, run.world_size = None, None, None, 1
    run._window = (time.perf_counter() - 1.0, 80, 0.0)
    run._report({})
    line = json.loads(capsys.readouterr().out.strip()[len(PREFIX):])
    assert line["loss"] == 3.21e-6
