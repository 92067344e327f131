"""A failed job's message says what to do about the usual crashes (control/crash_hints.py).

Seen: "last log line: RuntimeError: ProcessGroupNCCL is only supported with GPUs" on an emulated
host, and "invalid device ordinal", with nothing to say that emulated GPUs are the CPU or how
heet-tui numbers the GPUs a rank sees.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from control_lab import (
    fast_retries,
    job,
    run_and_clean,
    started_controller,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.crash_hints import crash_hint
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


@pytest.mark.parametrize(
    ("line", "emulated", "advice"),
    [
        ("RuntimeError: DataLoader worker (pid 6988) is killed by signal: Terminated. ", False,
         "worker_init_fn=elastic.ignore_sigterm"),
        ("torch.AcceleratorError: CUDA error: invalid device ordinal", False, "the process's own at index LOCAL_RANK"),
        ("torch.distributed.DistBackendError: NCCL error ... Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
         "device 3b000", False, "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))"),
        ("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", True, "use the gloo backend"),
        ("AssertionError: Torch not compiled with CUDA enabled", True, "emulated GPUs are this host's CPU"),
        ("OSError: [Errno 28] No space left on device: '/scratch/ckpt/model.pt.tmp'", False, "is full or over quota"),
        ("OSError: [Errno 122] Disk quota exceeded", False, "free space there"),
        ("ModuleNotFoundError: No module named 'timm'", False, "has no module timm: install it on the host"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False, "raise min_gpus"),
        ("/usr/bin/python3: can't open file '/home/u/.heet/hosts/a/train.py': [Errno 2] No such file or directory",
         False, 'no /home/u/.heet/hosts/a/train.py where the job runs: a script beside the job file needs workdir = "."'),
    ],
)
def test_the_usual_crashes_get_advice(line: str, emulated: bool, advice: str) -> None:
    assert advice in (crash_hint(["Traceback (most recent call last):", "  ...", line], emulated) or "")


def test_no_advice_where_it_would_mislead() -> None:
    nccl = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
    assert crash_hint([nccl], emulated=False) is None, "on real GPUs an NCCL error is not about the CPU"
    assert crash_hint(["ValueError: bad batch"], emulated=True) is None
    assert crash_hint([], emulated=True) is None


def test_a_job_that_fails_on_a_missing_module_says_where_to_install_it(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = fast_retries(0)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            command = [sys.executable, "-c", "import heet_no_such_module"]
            await ctl.post(SubmitJob(str(write_job(tmp_path, "m", steps=10, max_gpus=1, command=command))))
            snap = await wait_for(ctl, lambda s: job(s, "m").state is JobState.FAILED, 60, "m to fail")
            assert "has no module heet_no_such_module: install it on the host" in job(snap, "m").message
            assert "last log line: ModuleNotFoundError" in job(snap, "m").message

    run_and_clean(scenario, tmp_path)
    failed = [e.message for e in store.events("m", limit=20) if e.kind == "failed"]
    assert failed and failed[0].endswith("install it on the host, or name an interpreter that has it as the host's "
                                         "python in the hosts file")


def test_a_launch_refused_for_a_checkpoint_dir_of_another_store_fails_at_once(tmp_path: Path) -> None:
    """Retried twice more, it was refused the same way, and each try's plan had resized a running job."""
    from heet_tui.control.controller import ControllerOptions
    from heet_tui.control.execution import ExecOptions

    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    theirs = tmp_path / "ckpt" / "taken"
    theirs.mkdir(parents=True)
    (theirs / ".heet-owner").write_text("another-store-id\n")
    spec = write_job(tmp_path, "taken", steps=10, max_gpus=1)  # its checkpoint_dir is <tmp>/ckpt/taken
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False,
                                execution=ExecOptions(retry_backoff_s=0.1))

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "taken").state is JobState.FAILED, 60, "taken to fail")
            assert "holds another heet-tui state store's checkpoints" in job(snap, "taken").message
            assert "(1 attempt)" in job(snap, "taken").message, job(snap, "taken").message

    run_and_clean(scenario, tmp_path)
    assert len([e for e in store.events("taken", limit=20) if e.kind == "launch"]) <= 1


def test_every_checkpoint_dir_refusal_of_the_agent_is_for_good() -> None:
    """A link another user made on the way, or an open directory above: refused at generation 2 and
    again at 4, retried like a crash though nothing would change."""
    from heet_tui.control.crash_hints import refused_for_good
    from heet_tui.control.runtime import LAUNCH_REFUSED

    for said in ("checkpoint dir /s/ck: /s/ck is a link that uid 12345 made, not you: give the job a checkpoint_dir "
                 "of its own",
                 "checkpoint dir /o/ck: /o above it may be written by anyone and is not sticky: give the job a "
                 "checkpoint_dir in a directory of your own"):
        assert refused_for_good(f"{LAUNCH_REFUSED}: {said}"), said
    assert not refused_for_good(f"{LAUNCH_REFUSED}: workdir /data/x does not exist"), "may be made meanwhile"
    # one host's filesystem may be the cause: the job moves off it (test_host_health), not failed at once
    assert not refused_for_good(f"{LAUNCH_REFUSED}: host local-t4: launch: cannot start job: [Errno 13] Permission "
                                "denied: '/root'")


@pytest.mark.parametrize(
    ("workdir", "line", "named"),
    [
        ("/home/u/proj/run", "/usr/bin/python3: can't open file '/home/u/proj/trian_plain.py': [Errno 2] No such file "
         "or directory", "/home/u/proj/trian_plain.py"),
        ("/home/u/proj", "python3: can't open file '/home/u/nope.py': [Errno 2] No such file or directory",
         "/home/u/nope.py"),
        # no workdir, but a path of its own: no workdir would find it
        ("", "python3: can't open file '/tmp/jobs/tiyn.py': [Errno 2] No such file or directory", "/tmp/jobs/tiyn.py"),
    ],
)
def test_a_missing_script_of_a_job_with_a_workdir_is_said_missing_not_the_workdir_advice(
        workdir: str, line: str, named: str) -> None:
    """workdir = ".." and a misspelt "trian_plain.py" was told to set workdir = ".", which it had."""
    hint = crash_hint(["Traceback (most recent call last):", line], emulated=False, workdir=workdir,
                      ran_in=workdir or "/home/u/.heet/hosts/a") or ""
    assert f"there is no {named}" in hint
    assert "a typo in its name, or a file not copied to that host" in hint
    assert 'workdir = "."' not in hint and "without a workdir" not in hint


def test_a_job_whose_script_is_not_in_its_workdir_fails_saying_so(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(hosts, store, fast_retries(0)) as ctl:
            spec = write_job(tmp_path, "typo", steps=10, max_gpus=1, command=[sys.executable, "../nope.py"],
                             extra='workdir = "."\n')
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "typo").state is JobState.FAILED, 60, "typo to fail")
            message = job(snap, "typo").message
            assert f"there is no {tmp_path}/../nope.py where the job runs" in message, message
            assert 'needs workdir = "."' not in message, message

    run_and_clean(scenario, tmp_path)


NOT_FOUND = "FileNotFoundError: [Errno 2] No such file or directory: '{}'"


def test_a_relative_file_not_found_by_a_job_without_a_workdir_says_where_it_ran() -> None:
    """It ran in the agent's directory, not beside its job file, and nothing said so."""
    tail = ["Traceback (most recent call last):", NOT_FOUND.format("conf/base.toml")]
    hint = crash_hint(tail, emulated=False, ran_in="/home/u/.heet/hosts/a") or ""
    assert "conf/base.toml is relative" in hint
    assert "the job ran in /home/u/.heet/hosts/a" in hint and "a spec without a workdir runs there" in hint
    assert 'set workdir (workdir = "." for beside the job file)' in hint
    unknown = crash_hint(tail, emulated=False) or ""  # the host's entry is gone: where is not said
    assert "conf/base.toml is relative" in unknown and "the agent's own directory on its host" in unknown


def test_no_workdir_advice_for_an_absolute_path_or_a_spec_with_a_workdir() -> None:
    for path in ("/data/base.toml", "~/data/base.toml"):  # python does not expand ~: not the workdir's doing
        assert crash_hint([NOT_FOUND.format(path)], emulated=False, ran_in="/w/hosts/a") is None, path
    assert crash_hint([NOT_FOUND.format("conf/base.toml")], emulated=False, workdir="/home/u/proj",
                      ran_in="/home/u/proj") is None


def test_a_job_without_a_workdir_that_opens_a_relative_path_fails_saying_where_it_ran(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(hosts, store, fast_retries(0)) as ctl:
            command = [sys.executable, "-c", "open('conf/base.toml')"]
            await ctl.post(SubmitJob(str(write_job(tmp_path, "rel", steps=10, max_gpus=1, command=command))))
            snap = await wait_for(ctl, lambda s: job(s, "rel").state is JobState.FAILED, 60, "rel to fail")
            message = job(snap, "rel").message
            assert f"the job ran in {tmp_path / 'w-only' / 'hosts' / 'only'}" in message, message

    run_and_clean(scenario, tmp_path)


def test_a_relative_script_python_shows_joined_to_where_the_job_ran_still_gets_the_workdir_advice() -> None:
    """python names `train.py` run in the agent's directory by its whole path: that one is beside
    no job file, and the workdir advice is the fix; a path elsewhere is not."""
    line = "/usr/bin/python3: can't open file '/home/u/.heet/hosts/a/train.py': [Errno 2] No such file or directory"
    hint = crash_hint([line], emulated=False, workdir="", ran_in="/home/u/.heet/hosts/a") or ""
    assert 'needs workdir = "."' in hint, hint
