"""heet_agent.elastic, the helper a user's training script imports: reachable from every job the
agent starts with nothing installed, and doing what docs/TRAINING.md asks of an elastic script.
(examples/training.py uses it too: tests/control/test_training_example.py covers resizes and
fencing through that script.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import make_cluster, wait_until

from heet_tui.cluster import JobExited
from heet_tui.cluster.loopback_sshd import free_port

PREFIX = "@heet-progress "

# The docstring's loop, on a linear model: the smallest script a user would write.
SCRIPT = """
import sys
import pytest
import torch
import torch.nn.functional as F
from heet_agent import elastic

try:
    run = elastic.start(report_every=1, checkpoint_interval_s=float(sys.argv[1]) if len(sys.argv) > 1 else 600.0)
except elastic.ElasticError as exc:
    sys.exit(f"train.py: {exc}")
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
resumed = run.resume(model=model, optimizer=opt)
print(f"resumed={resumed} step={run.step}", file=sys.stderr, flush=True)
net = run.wrap(model)
part = run.shard()
g = torch.Generator().manual_seed(1)
xs, ys = torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g)
while run.running:
    ids = torch.arange(run.samples, run.samples + run.batch_size) % 64
    x, y = xs[ids][part], ys[ids][part]
    loss = F.cross_entropy(net(x), y, reduction="sum") * run.loss_scale
    opt.zero_grad()
    loss.backward()
    opt.step()
    accuracy = float((net(x).argmax(1) == y).float().mean())
    run.step_done(loss=loss, accuracy=torch.tensor(accuracy))
run.exit()
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEET_") and k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def _progress(text: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines() if line.startswith(PREFIX)]


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def test_a_job_the_agent_starts_imports_the_helper_with_nothing_installed(tmp_path):
    """`python -S` leaves site-packages (where heet-tui is installed here) off the path: only the
    agent's bundle, on the job's PYTHONPATH after the user's own entries, can provide it."""
    workdir = tmp_path / "work"
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
                     f'workdir = "{workdir}"\nemulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n')
    probe = ("import os, sys; from heet_agent import elastic; "
             "print(elastic.__file__); print(os.environ['PYTHONPATH'])")

    async def scenario():
        cluster = make_cluster(hosts)
        events = cluster.events()
        exits = []

        async def collect():
            async for event in events:
                if isinstance(event, JobExited):
                    exits.append(event.job)

        collector = asyncio.ensure_future(collect())
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            await cluster.launch("here", "probe", 1, [sys.executable, "-S", "-c", probe], env={"PYTHONPATH": "/mine"})
            assert await wait_until(lambda: exits, timeout=20)
            return exits[0]
        finally:
            collector.cancel()
            await cluster.stop()

    job = asyncio.run(scenario())
    log = (workdir / "hosts" / "here" / "logs" / "probe-g1.log").read_text()
    assert job.exit_code == 0, log
    helper, path = log.splitlines()[:2]
    bundle = next(workdir.glob("heet-agent-*.d"))
    assert Path(helper) == bundle / "heet_agent" / "elastic.py"
    assert path.split(os.pathsep) == ["/mine", str(bundle)]


def test_targets_batch_and_epochs_come_from_the_job_spec_and_metrics_are_reported(tmp_path):
    done = subprocess.run([sys.executable, str(_script(tmp_path))], capture_output=True, text=True, timeout=120,
                          env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_EPOCHS="1.5", HEET_DATASET_SAMPLES="40"))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = _progress(done.stdout)
    assert [p["step"] for p in lines] == list(range(1, 9)), "1.5 epochs of 40 samples at batch 8: 8 steps"
    assert lines[-1]["samples"] == 64 and lines[-1]["epoch"] == 1.6
    assert all(0 <= p["accuracy"] <= 1 and p["samples_per_s"] > 0 for p in lines)
    assert lines[-1]["checkpoint"] is None, "no checkpoint directory given: none written"
    assert not any("checkpoint_s" in p for p in lines), "nor a time to write one"


def test_settings_the_run_cannot_start_with_are_named(tmp_path):
    script = _script(tmp_path)
    no_batch = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                              env=_env(HEET_TARGET_STEPS="3"))
    assert no_batch.returncode == 1 and "train.py: no global batch size" in no_batch.stderr
    epochs = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                            env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_EPOCHS="2"))
    assert "HEET_TARGET_EPOCHS needs HEET_DATASET_SAMPLES" in epochs.stderr
    bad = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=_env(HEET_BATCH_SIZE="eight", HEET_TARGET_STEPS="3"))
    assert "HEET_BATCH_SIZE='eight' is not a number" in bad.stderr


def test_a_reserved_metric_name_is_refused(tmp_path):
    script = tmp_path / "clash.py"
    script.write_text(SCRIPT.replace("accuracy=torch.tensor(accuracy)", "samples=1"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"))
    assert run.returncode != 0 and "metrics may not be named samples" in run.stderr


def test_checkpoints_by_time_survive_a_kill_and_the_run_resumes_from_them(tmp_path):
    """A crash (SIGKILL: no chance to save) loses at most the checkpoint interval; here 0 s, so
    every reported step is on disk, and the next launch starts from it."""
    ckpt = tmp_path / "ckpt"
    env = _env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="100000", HEET_CHECKPOINT_DIR=str(ckpt), HEET_GENERATION="1")
    proc = subprocess.Popen([sys.executable, str(_script(tmp_path)), "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX) and json.loads(line[len(PREFIX):])["step"] >= 5:
            seen = json.loads(line[len(PREFIX):])
            proc.send_signal(signal.SIGKILL)
            break
    proc.communicate(timeout=30)
    # the checkpoint is what a launch resumes from; the small file beside it is written next, so
    # a kill between the two leaves it one save behind
    saved = torch.load(ckpt / "checkpoint.pt", weights_only=True)
    meta = json.loads((ckpt / "checkpoint.json").read_text())
    assert saved["step"] >= meta["step"] >= seen["step"] and meta["generation"] == saved["generation"] == 1
    assert seen["checkpoint"] == str(ckpt / "checkpoint.pt") and 0 <= seen["checkpoint_s"] < 30  # how long it took
    assert set(saved["objects"]) == {"model", "optimizer"}

    resumed = subprocess.run([sys.executable, str(_script(tmp_path))], capture_output=True, text=True, timeout=60,
                             env=env | {"HEET_TARGET_STEPS": str(saved["step"] + 3), "HEET_GENERATION": "2"})
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed=True step={saved['step']}" in resumed.stderr
    assert [p["step"] for p in _progress(resumed.stdout)] == [saved["step"] + i for i in (1, 2, 3)]
    assert "Warning" not in resumed.stderr, "a loss tensor that requires grad is read without torch's warning"

    # a launch that finds the target reached (a copy ran on to it unwatched) says where it is:
    # with no line, heet-tui counted the job done at the step it had last seen, "short of its target"
    at_target = subprocess.run([sys.executable, str(_script(tmp_path))], capture_output=True, text=True, timeout=60,
                               env=env | {"HEET_TARGET_STEPS": str(saved["step"] + 3), "HEET_GENERATION": "3"})
    assert at_target.returncode == 0, at_target.stderr[-2000:]
    assert [p["step"] for p in _progress(at_target.stdout)] == [saved["step"] + 3]


def test_a_checkpoint_written_by_the_older_example_layout_is_resumed(tmp_path):
    """examples/training.py kept model and optimizer at the checkpoint's top level before it used
    the helper: a job stopped then must not start again from scratch."""
    model = torch.nn.Linear(4, 2)
    with torch.no_grad():
        model.weight.fill_(0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 7, "samples": 56, "loss": 0.3,
                "generation": 1}, ckpt / "checkpoint.pt")
    (ckpt / "checkpoint.json").write_text(json.dumps({"step": 7, "samples": 56, "loss": 0.3, "generation": 1}))
    run = subprocess.run([sys.executable, str(_script(tmp_path))], capture_output=True, text=True, timeout=60,
                         env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="9", HEET_CHECKPOINT_DIR=str(ckpt),
                                  HEET_GENERATION="2"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "resumed=True step=7" in run.stderr
    assert [(p["step"], p["samples"]) for p in _progress(run.stdout)] == [(8, 64), (9, 72)]


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


LOADER_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "loader_training.py"


def test_a_stop_signalled_to_the_whole_process_group_saves_despite_dataloader_workers(tmp_path):
    """examples/loader_training.py, a DataLoader with a worker process. The agent stops a job with SIGTERM to its process group. A plain DataLoader's workers died
    of it and the main process raised "DataLoader worker ... killed by signal: Terminated" from
    inside its step (exit 1, no checkpoint: a resize lost 600 steps of a job on the local config)."""
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, str(LOADER_EXAMPLE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="1000000", HEET_CHECKPOINT_DIR=str(ckpt)))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX) and json.loads(line[len(PREFIX):])["step"] >= 20:
            os.killpg(proc.pid, signal.SIGTERM)
            break
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    last = _progress(rest)[-1]
    assert json.loads((ckpt / "checkpoint.json").read_text())["step"] == last["step"] > 20
    assert last["checkpoint"] == str(ckpt / "checkpoint.pt")


def test_a_script_that_forgets_exit_still_ends_a_stop_with_143(tmp_path):
    """Exit 0 means "target reached": a loop that just ended after a stop would mark the job done."""
    script = tmp_path / "no_exit.py"
    script.write_text(SCRIPT.replace("run.exit()", "print('fell off the end', file=sys.stderr)"))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="1000000"))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX) and json.loads(line[len(PREFIX):])["step"] >= 5:
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "fell off the end" in err
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"))
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_model_passed_wrapped_in_ddp_resumes_at_world_one(tmp_path):
    """A script that calls resume(model=net) with the DDP-wrapped model saved "module.*" keys, which
    the same script at world size 1 (no wrapper) could not load: the job crashed after a shrink."""
    script = tmp_path / "wrapped.py"
    script.write_text(SCRIPT.replace("net = run.wrap(model)\n", "").replace(
        "resumed = run.resume(model=model, optimizer=opt)",
        "net = run.wrap(model)\nresumed = run.resume(model=net, optimizer=opt)"))
    ckpt = tmp_path / "ckpt"
    port = free_port("127.0.0.1")
    two = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="4", HEET_CHECKPOINT_DIR=str(ckpt),
                                     RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                     MASTER_PORT=str(port))) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in two]
    assert [p.returncode for p in two] == [0, 0], outs[0][1][-2000:]
    assert not any(k.startswith("module.") for k in torch.load(ckpt / "checkpoint.pt")["objects"]["model"])
    one = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="6", HEET_CHECKPOINT_DIR=str(ckpt),
                                  HEET_GENERATION="1"))
    assert one.returncode == 0 and "resumed=True step=4" in one.stderr, one.stderr[-2000:]


def test_counts_from_the_environment_may_be_written_as_numbers(monkeypatch):
    """The job spec's target is a number: 300.0 or 12.5 steps must not read as "not a number"."""
    from heet_agent.elastic import ElasticError, ElasticRun

    monkeypatch.setenv("HEET_BATCH_SIZE", "8.0")
    for raw, steps in (("300.0", 300), ("12.5", 13)):
        monkeypatch.setenv("HEET_TARGET_STEPS", raw)
        assert ElasticRun(None, None, None, 0, None, 1, None, "t").target_steps == steps
    monkeypatch.setenv("HEET_TARGET_STEPS", "inf")
    with pytest.raises(ElasticError, match="HEET_TARGET_STEPS='inf' is not a number"):
        ElasticRun(None, None, None, 0, None, 1, None, "t")


def test_an_iterable_dataset_is_refused_by_name(monkeypatch):
    from heet_agent.elastic import ElasticError, ElasticRun

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10))

    monkeypatch.setenv("HEET_BATCH_SIZE", "4")
    monkeypatch.setenv("HEET_TARGET_STEPS", "3")
    with pytest.raises(ElasticError, match="needs a dataset with a length"):
        ElasticRun(None, None, None, 0, None, 1, None, "t").data_loader(Stream())


def test_ranks_on_hosts_that_share_no_filesystem_all_resume_from_rank_0s_checkpoint(tmp_path):
    """Seen over SSH with shared_fs = false: the checkpoint is copied to rank 0's host only, rank 1
    found none and trained from step 0 beside rank 0 until gloo aborted ("Received data size
    doesn't match") or both ranks hung at the target in different collectives."""
    script = _script(tmp_path)
    first = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                           env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="4", HEET_CHECKPOINT_DIR=str(tmp_path / "a")))
    assert first.returncode == 0, first.stderr[-2000:]
    port = free_port("127.0.0.1")
    own_disk = {0: tmp_path / "a", 1: tmp_path / "b"}  # rank 1's host has no copy
    two = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="8", HEET_CHECKPOINT_DIR=str(own_disk[r]),
                                     HEET_GENERATION="1", RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))) for r in range(2)]
    try:
        outs = [p.communicate(timeout=60) for p in two]
    finally:
        for p in two:
            p.kill()
    assert [p.returncode for p in two] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    assert "resumed=True step=4" in outs[1][1], "rank 1 took rank 0's checkpoint"
    assert "rank(s) 1 (none) found another checkpoint than rank 0's: sent rank 0's (step 4)" in outs[0][1]
    assert [p["step"] for p in _progress(outs[0][0])] == [5, 6, 7, 8]


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
                          env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="20", HEET_EMULATED_SPEED="4.0"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rates = [p["samples_per_s"] for p in _progress(proc.stdout)[1:]]  # the first window starts the workers
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
                              env=_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"), start_new_session=True)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-f", str(script)], check=False)
        raise AssertionError("the run reached its target and did not exit") from None
    assert done.returncode == 0 and "fell off the end" in done.stderr, done.stderr[-2000:]
    assert "killed by signal" not in done.stderr
