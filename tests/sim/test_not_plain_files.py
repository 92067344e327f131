"""Inputs that are devices or pipes: `--workload /dev/zero` read until memory ran out (10 GB in 9 s
on a shared login node), a named pipe hung with no word. Run in a child with a memory cap and a
timeout, so that a regression fails here instead of taking the machine down."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.capped import fifo_in
from support.capped import run_capped as _run


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    return fifo_in(tmp_path)


def test_simulator_inputs_that_are_devices_are_refused(tmp_path: Path, profile_dir: Path) -> None:
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\n")
    for argv, said in ((["--workload", "/dev/zero", "--profiles", str(profile_dir)], "cannot read workload"),
                       (["--workload", str(workload), "--cluster", "/dev/zero", "--profiles", str(profile_dir)],
                        "cannot read cluster file")):
        done = _run("sim", *argv, "--policy", "fifo", "--oracle")
        assert done.returncode == 2 and "not a regular file (a pipe or device?)" in done.stderr, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
    profiles = tmp_path / "profiles"
    shutil.copytree(profile_dir, profiles)
    target = profiles / "cifar10" / "placements-aws.csv"
    target.unlink()
    target.symlink_to("/dev/zero")
    done = _run("sim", "--workload", str(workload), "--profiles", str(profiles), "--policy", "fifo", "--oracle")
    assert done.returncode == 2 and "placements-aws.csv: not a regular file" in done.stderr, done.stderr


def test_a_pipe_nobody_writes_to_reads_as_empty_and_one_being_written_is_read(fifo: Path, tmp_path: Path,
                                                                              profile_dir: Path) -> None:
    """`--trace <(zcat trace.csv.gz)` is a pipe too: refusing every pipe refused that (it worked)."""
    import subprocess

    done = _run("sim", "--workload", str(fifo), "--profiles", str(profile_dir), "--policy", "fifo", "--oracle")
    assert done.returncode == 2 and "empty workload" in done.stderr, done.stderr  # not a hang
    trace = Path(__file__).parents[1] / "data" / "workloads" / "philly-trace-excerpt.csv"
    writer = subprocess.Popen(["sh", "-c", f'cat "{trace}" > "{fifo}"'])
    try:
        done = _run("sim", "generate", "--trace", str(fifo), "--jobs", "5", "--hours", "1000", "--seed", "1")
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("name,time,application,num_replicas,batch_size"), done.stdout[:200]
    workload = Path(__file__).parents[1] / "data" / "workloads" / "saturn-first7.csv"
    writer = subprocess.Popen(["sh", "-c", f'cat "{workload}" > "{fifo}"'])
    try:  # read once: the simulator read the file a second time, and a pipe was empty then
        done = _run("sim", "--workload", str(fifo), "--profiles", str(profile_dir), "--policy", "fifo", "--oracle")
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 0 and "fifo" in done.stdout, done.stderr
