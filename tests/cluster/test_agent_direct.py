"""The agent on its own (as `python -m heet_agent`): handshake rules and bad requests."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from agent_process import AgentProcess, alive


def test_banner_then_version_check(agent):
    banner = agent.line()
    assert banner["event"] == "agent_start" and banner["protocol"] == 1
    refused = agent.request("hello", protocol=2)
    assert refused["ok"] is False and "protocol mismatch" in refused["error"]
    accepted = agent.request("hello", protocol=1, probes=[], emulate={"gpu_type": "V100", "count": 1, "speed": 0.5})
    assert accepted["ok"] and accepted["result"]["inventory"]["source"] == "emulated"


def test_bad_lines_and_requests_get_answers_and_the_agent_keeps_serving(agent, tmp_path):
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    agent.send_raw(b"this is not json\n")
    assert "not JSON" in agent.events_until("protocol_error")["error"]
    agent.send_raw(b'{"op": "ping"}\n')
    assert "without an integer id" in agent.events_until("protocol_error")["error"]
    assert "unknown op" in agent.request("format_disk")["error"]
    assert "argv" in agent.request("launch", job_id="j", generation=0, argv=[])["error"]
    assert "job_id" in agent.request("launch", job_id="../etc", generation=0, argv=["true"])["error"]
    assert "command not found" in agent.request("launch", job_id="j", generation=0, argv=["no-such-cmd-xyz"])["error"]
    assert agent.request("ping")["ok"]


def test_shutdown_leaves_jobs_running(agent, tmp_path):
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    launched = agent.request("launch", job_id="sleeper", generation=1, argv=["sleep", "30"])["result"]
    assert agent.request("shutdown")["result"] == {"jobs_left_running": 1}
    assert agent.proc.wait(timeout=10) == 0
    os.kill(launched["pid"], 0)  # still there
    os.killpg(launched["pid"], 9)


def test_a_check_only_agent_leaves_the_running_agent_and_its_jobs_alone(agent, tmp_path):
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    launched = agent.request("launch", job_id="sleeper", generation=1, argv=["sleep", "30"])["result"]
    check = AgentProcess(tmp_path, "--check-only")
    try:
        assert check.line()["event"] == "agent_start"
        hello = check.request("hello", protocol=1, probes=[])["result"]
        assert hello["jobs"] == [], "it adopts nothing"
        refused = check.request("launch", job_id="other", generation=1, argv=["true"])
        assert not refused["ok"] and "only checks the host" in refused["error"]
        assert not check.request("stop", job_id="sleeper", grace_s=1)["ok"]
        assert check.close() == 0
    finally:
        if check.proc.poll() is None:
            check.proc.kill()
    assert agent.proc.poll() is None and agent.request("ping")["ok"], "the agent that runs the jobs stays"
    assert [j["job_id"] for j in agent.request("jobs")["result"]["jobs"]] == ["sleeper"]
    os.killpg(launched["pid"], 9)


def test_an_agent_of_another_controller_is_refused_one_of_the_same_takes_over(tmp_path):
    # Two controllers (two state directories) on one host would otherwise take it from each
    # other at every reconnect, each counting the other's jobs as lost.
    first = AgentProcess(tmp_path)
    others = []
    try:
        first.line()
        assert first.request("hello", protocol=1, probes=[], owner="store-a")["ok"]
        other = AgentProcess(tmp_path)
        others.append(other)
        other.line()
        refused = other.request("hello", protocol=1, probes=[], owner="store-b")
        assert not refused["ok"] and "managed by another heet-tui controller" in refused["error"]
        assert "another user on this host needs a workdir of their own" in refused["error"]
        assert "store-a" in refused["error"] and "--state" in refused["error"]
        assert not other.request("jobs")["ok"], "no job requests before a hello that took the host"
        assert first.request("ping")["ok"], "the first agent goes on serving"
        again = AgentProcess(tmp_path)
        others.append(again)
        again.line()
        assert again.request("hello", protocol=1, probes=[], owner="store-a")["ok"], "its own controller's is"
        assert first.proc.wait(timeout=10) == 0, "the old agent was asked to exit"
    finally:
        for process in (first, *others):
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait()


def test_the_agent_keeps_the_latest_hundred_ended_runs_and_their_files(agent, tmp_path):
    """Each launch left a record, a log and an exit file on the host for good."""
    from heet_agent.jobstate import KEEP_FINISHED

    agent.line()
    agent.request("hello", protocol=1, probes=[])
    outside = tmp_path / "mine.log"  # a log path the controller chose is never deleted
    assert agent.request("launch", job_id="first", generation=1, argv=["true"], log=str(outside))["ok"]
    agent.events_until("job_exit")
    for n in range(KEEP_FINISHED + 5):
        assert agent.request("launch", job_id=f"j{n}", generation=1, argv=["echo", f"run {n}"])["ok"]
    state_file = tmp_path / "hosts" / "h1" / "agent-state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every exit reported: the oldest five are forgotten
        state = json.loads(state_file.read_text())
        if len(state["jobs"]) == KEEP_FINISHED and all(j.get("reported") for j in state["jobs"]):
            break
        assert agent.request("ping")["ok"]
        time.sleep(0.2)
    logs = sorted(p.name for p in (tmp_path / "hosts" / "h1" / "logs").iterdir())
    assert len(logs) == KEEP_FINISHED and "j5-g1.log" in logs and "j4-g1.log" not in logs
    assert len(list((tmp_path / "hosts" / "h1" / "exits").iterdir())) == KEEP_FINISHED
    assert outside.exists()
    assert [j["job_id"] for j in state["jobs"]][:2] == ["j5", "j6"] and len(state["jobs"]) == KEEP_FINISHED
    assert "run 104" in "".join(agent.request("log_tail", job_id="j104", generation=1, lines=5)["result"]["lines"])


PLAIN_SCRIPT = """
import json, sys, time
for step in range(1, 4):
    sys.stderr.write("\\r%3d%%|%s|" % (step * 33, "#" * step))  # a tqdm-like bar, never ended by a newline
    sys.stderr.flush()
    print("@heet-progress " + json.dumps({"step": step, "samples": step * 10, "samples_per_s": 10.0}))
    time.sleep(0.5 if step < 3 else 30)
"""


@pytest.mark.parametrize("host_value", [None, ""], ids=["unset", "set-but-empty"])
def test_a_plain_print_beside_a_progress_bar_reaches_the_controller_while_the_script_runs(tmp_path, host_value):
    """No flush=True, a tqdm bar on stderr, and a host shell without PYTHONUNBUFFERED (ours has it):
    stdout was block-buffered into the log, so no line came until the script ended, and the
    bar's last redraw in front of each line hid the prefix. Set but empty is unset to Python;
    the agent took it as the host's choice and left the script buffered."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if host_value is not None:
        env["PYTHONUNBUFFERED"] = host_value
    process = AgentProcess(tmp_path, env=env)
    launched = None
    try:
        process.line()
        process.request("hello", protocol=1, probes=[])
        launched = process.request("launch", job_id="plain", generation=1, argv=[sys.executable, "-c", PLAIN_SCRIPT])
        assert launched["ok"], launched
        progress = process.events_until("progress")["progress"]
        assert progress["samples_per_s"] == 10.0 and 1 <= progress["step"] <= 3
        (job,) = process.request("jobs")["result"]["jobs"]
        assert job["state"] == "running"  # the line came while the script ran, not when it ended and flushed
        tail = process.request("log_tail", job_id="plain", generation=1, lines=10)["result"]["lines"]
        assert tail[0].startswith(" 33%|#|@heet-progress") and all("\\r" not in line for line in tail)
    finally:
        if launched and launched["ok"]:
            os.killpg(launched["result"]["pid"], 9)
        process.proc.kill()
        process.proc.wait()


def test_a_rank_sees_its_jobs_gpus_on_the_host_in_local_rank_order(agent, tmp_path):
    """Scripts written for torchrun call torch.cuda.set_device(LOCAL_RANK). With only its own GPU
    visible, every rank but the first asked for a device that did not exist ("invalid device
    ordinal"): a standard DDP script crashed on any host where a job had two GPUs."""
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    log = tmp_path / "env.log"
    show = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ.get('HEET_EMULATED_GPUS'))"
    assert agent.request("launch", job_id="r1", generation=1, argv=[sys.executable, "-c", show], gpus=[5],
                         visible=[2, 5], env={"LOCAL_RANK": "1"}, log=str(log))["ok"]
    agent.events_until("job_exit")
    assert log.read_text().split() == ["2,5", "None"], "physical GPU 5 is device LOCAL_RANK = 1"
    refused = agent.request("launch", job_id="r2", generation=1, argv=["true"], gpus=[3], visible=[2, 5])
    assert "visible must include every one of gpus" in refused["error"]


def test_a_state_file_record_that_would_signal_a_group_of_others_is_dropped(tmp_path):
    """A record is signalled with killpg: a pgid of 0 or 1 (a damaged or hand-edited state file)
    would reach the agent's own group, or every process of the user."""
    from heet_agent.jobstate import STATE_NAME, StateFile

    path = tmp_path / STATE_NAME
    good = {"job_id": "a", "generation": 1, "pid": 4242, "pgid": 4242, "state": "running"}
    path.write_text(json.dumps({"jobs": [good, {**good, "job_id": "b", "pgid": 0}, {**good, "job_id": "c", "pgid": 1},
                                         {**good, "job_id": "d", "pid": True}, {**good, "job_id": "e", "pgid": "7"}],
                                "floors": {}}))
    jobs, _, note = StateFile(str(tmp_path)).load()
    assert [j["job_id"] for j in jobs] == ["a"] and note is None


def _events_until_exit(agent, job_id):
    seen = []
    while True:
        message = agent.line()
        if message.get("job_id") == job_id:
            seen.append(message)
            if message.get("event") == "job_exit":
                return seen


def test_a_job_printing_tens_of_megabytes_still_has_its_progress_read(agent):
    """The agent read a log 256 KiB a poll (1 MB/s): a chattier job's progress fell minutes
    behind, and one that ended ahead of the reading had its last progress never read."""
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    code = ("import sys; sys.stdout.write(('x' * 99 + '\\n') * 200_000); "
            "print('@heet-progress {\"step\": 7, \"samples\": 224, \"samples_per_s\": 50.0}', flush=True)")
    assert agent.request("launch", job_id="chatty", generation=1, argv=[sys.executable, "-c", code])["ok"]
    seen = _events_until_exit(agent, "chatty")
    steps = [m["progress"]["step"] for m in seen if m.get("event") == "progress"]
    assert steps == [7], seen[-3:]


def test_what_a_job_leaves_in_its_process_group_is_killed_when_it_ends(agent, tmp_path):
    """A child that ignored the stop's SIGTERM lived on after the job (holding its GPU, which then
    showed as free): the SIGKILL at the end of the grace went only to a group whose leader had exited."""
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    pid_file = tmp_path / "child.pid"
    code = ("import os, signal, sys, time\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    time.sleep(120)\n"
            "    os._exit(0)\n"
            f"open({str(pid_file)!r}, 'w').write(str(child))\n")
    assert agent.request("launch", job_id="forker", generation=1, argv=[sys.executable, "-c", code])["ok"]
    _events_until_exit(agent, "forker")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(child):
        time.sleep(0.05)
    assert not alive(child), "the job's child outlived it"


def test_the_agents_log_has_the_time_on_each_line_and_is_moved_aside_when_large(tmp_path):
    """A postmortem could not tell which agent start went with which controller event (no time
    on any line), and the log was only ever appended to."""
    import re

    log = tmp_path / "hosts" / "h1" / "agent.log"
    log.parent.mkdir(parents=True)
    log.write_text("old line\n" * 300_000)  # past what is kept
    first = AgentProcess(tmp_path)
    assert first.line()["event"] == "agent_start"
    assert first.close() == 0
    assert (tmp_path / "hosts" / "h1" / "agent.log.1").read_text().startswith("old line\n")
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d heet-agent ", line) for line in lines), lines
    assert "starting in" in lines[0] and lines[1].endswith("exiting")


def test_a_copys_controller_refused_once_is_refused_while_it_runs_and_a_restart_after_a_pause_is_not(tmp_path):
    """Seen: the original controller paused 40 s (kill -STOP); the agents stopped hearing from it,
    the controller of a copy of its state, refused until then, took the hosts and stopped its jobs."""
    started = []

    def agent_for(session, previous=""):
        process = AgentProcess(tmp_path)
        started.append(process)
        process.line()
        return process.request("hello", protocol=1, probes=[], owner="store-a", session=session,
                               previous_session=previous)

    try:
        assert agent_for("original")["ok"]
        refused = agent_for("copy")
        assert not refused["ok"] and "of the same state store (a copy" in refused["error"]
        mark = tmp_path / "hosts" / "h1" / "agent.session"
        long_ago = time.time() - 120
        os.utime(mark, (long_ago, long_ago))  # the original is paused: it has not spoken for two minutes
        again = agent_for("copy")
        assert not again["ok"] and "stop one of the two and restart the other" in again["error"], "refused for good"
        assert started[0].proc.poll() is None, "the original's agent still serves it"
        assert agent_for("original-restarted")["ok"], "a restart after the pause takes the host, as after a cut"
        assert not agent_for("copy-2", previous="copy")["ok"], "succeeding a run that does not serve here: no"
        assert agent_for("restarted-again", previous="original-restarted")["ok"], \
            "the run that succeeds the one served here takes over at once, though it spoke just now"
    finally:
        for process in started:
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait()


def test_jobs_on_emulated_gpus_get_one_thread_unless_they_say(tmp_path):
    """Each rank's torch took a thread per core: on a 2-core machine with emulated GPUs a job ran
    at a tenth of its speed on 2 GPUs, and every plan shrank it back to 1. Then a share of the
    cores: a 1-GPU host of 2 cores measured its V100 (0.6) slower than a T4 (0.3), the second
    thread's spinning counted in the step's CPU time."""
    agent = AgentProcess(tmp_path / "agent", env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
    try:
        agent.line()
        emulate = {"gpu_type": "T4", "count": 1, "speed": 1.0}  # fewer GPUs than cores (2 here, in CI)
        assert agent.request("hello", protocol=1, probes=[], emulate=emulate)["ok"]
        out = tmp_path / "threads"
        script = f"import os; open({str(out)!r}, 'a').write(os.environ['OMP_NUM_THREADS'] + ' ')"
        for n, env in enumerate(({}, {"OMP_NUM_THREADS": "3"})):
            assert agent.request("launch", job_id=f"t{n}", generation=1, argv=[sys.executable, "-c", script],
                                 env=env, gpus=[0])["ok"]
            assert agent.events_until("job_exit")["exit_code"] == 0
        assert out.read_text().split() == ["1", "3"]
    finally:
        agent.proc.kill()
        agent.proc.wait()


def test_a_check_warns_when_another_state_stores_controller_manages_the_host(tmp_path):
    """`hosts check` said "ready" for a host whose agent served another user's controller, and
    the user's own controller was then refused there."""
    serving = AgentProcess(tmp_path)
    checks = []
    try:
        serving.line()
        assert serving.request("hello", protocol=1, probes=[], owner="store-a")["ok"]
        for owner in ("store-b", "", "store-a"):
            check = AgentProcess(tmp_path, "--check-only")
            checks.append(check)
            check.line()
            warnings = check.request("hello", protocol=1, probes=[], owner=owner)["result"]["inventory"]["warnings"]
            said = [w for w in warnings if "manages this host" in w]
            if owner == "store-a":
                assert said == [], "its own controller's agent is no warning"
            else:
                assert len(said) == 1 and f"agent pid {serving.proc.pid} serves state store store-a" in said[0], said
                assert ("a controller of this state store is refused" if owner
                        else "a controller of another state store is refused") in said[0], said
        assert serving.request("ping")["ok"]
    finally:
        for process in (serving, *checks):
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait()


def test_a_stop_begun_before_the_controller_went_away_is_seen_through(agent, tmp_path):
    """The controller was killed in a stop's grace: the agent exited on its link's end, the SIGKILL
    due at the end of the grace was never sent, and a job that ignored SIGTERM ran on, holding
    its GPU, until a controller came back."""
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(120)\n"
    launched = agent.request("launch", job_id="deaf", generation=1, argv=[sys.executable, "-c", code])["result"]
    deadline = time.monotonic() + 10
    while "ready" not in (Path(launched["log"]).read_text() if Path(launched["log"]).exists() else ""):
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.05)
    assert agent.request("stop", job_id="deaf", grace_s=1.0)["ok"]
    agent.proc.stdin.close()  # the controller is gone
    assert agent.proc.wait(timeout=15) == 0, "the agent ends once the stop is through"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(launched["pid"]):
        time.sleep(0.05)
    assert not alive(launched["pid"]), "killed at the end of its grace"
