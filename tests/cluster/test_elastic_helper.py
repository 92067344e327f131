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
from elastic_support import PREFIX, SCRIPT, progress_of, script_env, training_script
from helpers import make_cluster, wait_until

from heet_tui.cluster import JobExited
from heet_tui.cluster.loopback_sshd import free_port


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
    done = subprocess.run([sys.executable, str(training_script(tmp_path))], capture_output=True, text=True, timeout=120,
                          env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_EPOCHS="1.5", HEET_DATASET_SAMPLES="40"))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = progress_of(done.stdout)
    assert [p["step"] for p in lines] == list(range(1, 9)), "1.5 epochs of 40 samples at batch 8: 8 steps"
    assert lines[-1]["samples"] == 64 and lines[-1]["epoch"] == 1.6
    assert all(0 <= p["accuracy"] <= 1 and p["samples_per_s"] > 0 for p in lines)
    assert lines[-1]["checkpoint"] is None, "no checkpoint directory given: none written"
    assert not any("checkpoint_s" in p for p in lines), "nor a time to write one"


def test_settings_the_run_cannot_start_with_are_named(tmp_path):
    script = training_script(tmp_path)
    no_batch = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                              env=script_env(HEET_TARGET_STEPS="3"))
    assert no_batch.returncode == 1 and "train.py: no global batch size" in no_batch.stderr
    epochs = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                            env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_EPOCHS="2"))
    assert "HEET_TARGET_EPOCHS needs HEET_DATASET_SAMPLES" in epochs.stderr
    bad = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=script_env(HEET_BATCH_SIZE="eight", HEET_TARGET_STEPS="3"))
    assert "HEET_BATCH_SIZE='eight' is not a number" in bad.stderr


def test_a_reserved_metric_name_is_refused(tmp_path):
    script = tmp_path / "clash.py"
    script.write_text(SCRIPT.replace("accuracy=torch.tensor(accuracy)", "samples=1"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"))
    assert run.returncode != 0 and "metrics may not be named samples" in run.stderr


def test_checkpoints_by_time_survive_a_kill_and_the_run_resumes_from_them(tmp_path):
    """A crash (SIGKILL: no chance to save) loses at most the checkpoint interval; here 0 s, so
    every reported step is on disk, and the next launch starts from it."""
    ckpt = tmp_path / "ckpt"
    env = script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="100000", HEET_CHECKPOINT_DIR=str(ckpt), HEET_GENERATION="1")
    proc = subprocess.Popen([sys.executable, str(training_script(tmp_path)), "0"], stdout=subprocess.PIPE,
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

    resumed = subprocess.run([sys.executable, str(training_script(tmp_path))], capture_output=True, text=True, timeout=60,
                             env=env | {"HEET_TARGET_STEPS": str(saved["step"] + 3), "HEET_GENERATION": "2"})
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed=True step={saved['step']}" in resumed.stderr
    assert [p["step"] for p in progress_of(resumed.stdout)] == [saved["step"] + i for i in (1, 2, 3)]
    assert "Warning" not in resumed.stderr, "a loss tensor that requires grad is read without torch's warning"

    # a launch that finds the target reached (a copy ran on to it unwatched) says where it is:
    # with no line, heet-tui counted the job done at the step it had last seen, "short of its target"
    at_target = subprocess.run([sys.executable, str(training_script(tmp_path))], capture_output=True, text=True, timeout=60,
                               env=env | {"HEET_TARGET_STEPS": str(saved["step"] + 3), "HEET_GENERATION": "3"})
    assert at_target.returncode == 0, at_target.stderr[-2000:]
    assert [p["step"] for p in progress_of(at_target.stdout)] == [saved["step"] + 3]


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
    run = subprocess.run([sys.executable, str(training_script(tmp_path))], capture_output=True, text=True, timeout=60,
                         env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="9", HEET_CHECKPOINT_DIR=str(ckpt),
                                  HEET_GENERATION="2"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "resumed=True step=7" in run.stderr
    assert [(p["step"], p["samples"]) for p in progress_of(run.stdout)] == [(8, 64), (9, 72)]


def test_a_script_that_forgets_exit_still_ends_a_stop_with_143(tmp_path):
    """Exit 0 means "target reached": a loop that just ended after a stop would mark the job done."""
    script = tmp_path / "no_exit.py"
    script.write_text(SCRIPT.replace("run.exit()", "print('fell off the end', file=sys.stderr)"))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="1000000"))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(PREFIX) and json.loads(line[len(PREFIX):])["step"] >= 5:
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "fell off the end" in err
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="3"))
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
                            env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="4", HEET_CHECKPOINT_DIR=str(ckpt),
                                     RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                     MASTER_PORT=str(port))) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in two]
    assert [p.returncode for p in two] == [0, 0], outs[0][1][-2000:]
    assert not any(k.startswith("module.") for k in torch.load(ckpt / "checkpoint.pt")["objects"]["model"])
    one = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="6", HEET_CHECKPOINT_DIR=str(ckpt),
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
    monkeypatch.setenv("HEET_TARGET_STEPS", "30")
    monkeypatch.setenv("RANK", "0")
    assert ElasticRun(None, None, None, 0, None, 1, None, "t").rank == 0, "a rank may be 0"
    monkeypatch.setenv("HEET_GENERATION", "hand")  # a script run by hand: it was a traceback
    with pytest.raises(ElasticError, match="HEET_GENERATION='hand' is not a number"):
        ElasticRun(None, None, None, 0, None, 1, None, "t")


def test_ranks_on_hosts_that_share_no_filesystem_all_resume_from_rank_0s_checkpoint(tmp_path):
    """Seen over SSH with shared_fs = false: the checkpoint is copied to rank 0's host only, rank 1
    found none and trained from step 0 beside rank 0 until gloo aborted ("Received data size
    doesn't match") or both ranks hung at the target in different collectives."""
    script = training_script(tmp_path)
    first = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                           env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="4", HEET_CHECKPOINT_DIR=str(tmp_path / "a")))
    assert first.returncode == 0, first.stderr[-2000:]
    port = free_port("127.0.0.1")
    own_disk = {0: tmp_path / "a", 1: tmp_path / "b"}  # rank 1's host has no copy
    two = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=script_env(HEET_BATCH_SIZE="8", HEET_TARGET_STEPS="8", HEET_CHECKPOINT_DIR=str(own_disk[r]),
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
    assert [p["step"] for p in progress_of(outs[0][0])] == [5, 6, 7, 8]
