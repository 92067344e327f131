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


@pytest.mark.parametrize("device", ["/dev/zero", "fifo"])
def test_simulator_inputs_that_are_not_files_are_refused(device: str, fifo: Path, tmp_path: Path,
                                                          profile_dir: Path) -> None:
    bad = str(fifo) if device == "fifo" else device
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,1,128\n")
    for argv, said in ((["--workload", bad, "--profiles", str(profile_dir)], "cannot read workload"),
                       (["--workload", str(workload), "--cluster", bad, "--profiles", str(profile_dir)],
                        "cannot read cluster file")):
        done = _run("sim", *argv, "--policy", "fifo", "--oracle")
        assert done.returncode == 2 and "not a regular file (a pipe or device?)" in done.stderr, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
    profiles = tmp_path / "profiles"
    shutil.copytree(profile_dir, profiles)
    target = profiles / "cifar10" / "placements-aws.csv"
    target.unlink()
    target.symlink_to(bad)
    done = _run("sim", "--workload", str(workload), "--profiles", str(profiles), "--policy", "fifo", "--oracle")
    assert done.returncode == 2 and "placements-aws.csv: not a regular file" in done.stderr, done.stderr

