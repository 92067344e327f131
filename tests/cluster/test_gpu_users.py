"""Whose processes compute on a GPU: the agent's classification and the controller's reading of it."""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

from heet_agent.gpu_users import mark_others
from heet_agent.inventory import parse_compute_apps_csv, parse_nvidia_smi_csv

from heet_tui.cluster.gpu_users import other_processes
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.snapshot import HostStatus


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_processes_outside_the_agents_jobs_on_gpus_its_jobs_do_not_hold_are_others() -> None:
    notebook, job, ended = _sleeper(), _sleeper(), _sleeper()
    gone = _sleeper()
    gone.kill()
    gone.wait()
    try:
        jobs = [{"pgid": job.pid, "state": "running", "gpus": [0]},
                {"pgid": ended.pid, "state": "exited", "gpus": [2]}]  # NVML may list it a moment longer
        gpus = [{"index": 0, "processes": [job.pid, notebook.pid]}, {"index": 1, "processes": [notebook.pid, gone.pid]},
                {"index": 2, "processes": [ended.pid]}, {"index": 3, "processes": None}]
        mark_others(gpus, jobs)
        me = pwd.getpwuid(os.getuid()).pw_name
        assert gpus[0]["others"] == [], "a GPU a live job holds is the job's"
        assert gpus[1]["others"] == [{"pid": notebook.pid, "user": me, "name": "sleep"}], "a gone PID is nobody's"
        assert gpus[2]["others"] == [], "an ended job's process is still its own"
        assert "others" not in gpus[3], "processes not known: nothing is claimed"
        crowd = [{"index": 0, "processes": [notebook.pid] * 11}]
        mark_others(crowd, [])
        assert len(crowd[0]["others"]) == 8 and crowd[0]["others_more"] == 3
    finally:
        for p in (notebook, job, ended):
            p.kill()
            p.wait()


def test_a_pid_never_visible_here_over_several_readings_is_someone_elses() -> None:
    """In a container NVML gives the host's PIDs: another container's training run was on a GPU
    that read as free, and plans put jobs there (out of memory). At one reading it may be a
    process that has just ended, so it takes three in a row."""
    from heet_agent.gpu_users import HIDDEN_READINGS

    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    hidden = pid_max + 7  # no process here can have it
    said = []
    for _ in range(HIDDEN_READINGS):
        gpus = [{"index": 0, "uuid": "GPU-hidden-test", "processes": [hidden]}]
        said.append(mark_others(gpus, [])[0]["others"])
    assert said[:-1] == [[]] * (HIDDEN_READINGS - 1), "a process that just ended is nobody's"
    assert said[-1] == [{"pid": hidden, "user": None, "name": "(not visible here: another container?)"}]
    assert other_processes({"others": said[-1]}) == (f"pid {hidden} (not visible here: another container?)",)
    gpus = [{"index": 0, "uuid": "GPU-hidden-test", "processes": []}]  # it ended: counted afresh
    assert mark_others(gpus, [])[0]["others"] == []
    gpus = [{"index": 0, "uuid": "GPU-hidden-test", "processes": [hidden]}]
    assert mark_others(gpus, [])[0]["others"] == []


def test_another_state_stores_heet_job_is_named_as_such() -> None:
    """Two users' controllers on one host: the other's training read "in use outside heet"."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True,
                             env={**os.environ, "HEET_JOB_ID": "train.r0.5e4f1ec2"})
    try:
        # until it has exec'd, the child's /proc environ is this process's (no HEET_JOB_ID): read
        # at that moment under load, the test failed with no job named
        deadline = time.monotonic() + 10
        while b"HEET_JOB_ID=" not in Path(f"/proc/{other.pid}/environ").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        gpus = [{"index": 0, "processes": [other.pid]}]
        mark_others(gpus, [])
        assert gpus[0]["others"][0]["heet_job"] == "train.r0.5e4f1ec2"
        me = pwd.getpwuid(os.getuid()).pw_name
        # its name is python or sleep, whether or not the child has exec'd yet
        assert other_processes(gpus[0])[0].endswith(f" ({me}), heet job train.r0.5e4f1ec2 of another state store")
    finally:
        other.kill()
        other.wait()


def test_nvidia_smi_compute_apps_are_read_by_gpu_uuid() -> None:
    gpus = parse_nvidia_smi_csv("0, GPU-a, NVIDIA A100-SXM4-40GB, 40960, 3, 0\n1, GPU-b, NVIDIA A100-SXM4-40GB, 40960, 9, 1\n")
    parse_compute_apps_csv("GPU-b, 4242\nGPU-b, 77\nGPU-zz, 5\nNo running processes found\nGPU-a, [N/A]\n", gpus)
    assert [g["processes"] for g in gpus] == [[], [4242, 77]]


def test_the_controller_drops_what_it_cannot_read_and_names_the_rest() -> None:
    raw = {"others": [{"pid": 4242, "user": "alice", "name": "python"}, {"pid": "x"}, "junk", {"pid": True},
                      {"pid": 7, "user": None, "name": None}], "others_more": 3}
    assert other_processes(raw) == ("pid 4242 python (alice)", "pid 7", "and 3 more")
    assert other_processes({"others": "nonsense"}) == () and other_processes({}) == ()
    from heet_tui.cluster.gpu_users import gpus_used_by_others, users_of

    box = HostStatus("box", HostState.READY, gpus=(Gpu(0, "A100"), Gpu(1, "A100", others=("pid 4242 python (alice)",))))
    assert gpus_used_by_others([box]) == {"box": {1}}
    assert users_of(box, {0, 1}) == "gpu1: pid 4242 python (alice)"
