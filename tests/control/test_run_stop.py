"""``heet-tui run`` stopped by a signal says so in the controller's log and on the terminal:
the log used to hold only "controller started" lines, so a controller that had stopped (a
SIGTERM from a logout, an admin, a scheduler) left nothing to say when or why."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from control_lab import write_local_hosts


def _stopped_by(tmp_path: Path, sig: signal.Signals) -> tuple[subprocess.Popen, str, str, Path]:
    """``heet-tui run`` on one local host, sent ``sig`` once it runs: the process, its output and its state."""
    hosts, state = write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]), tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.Popen([sys.executable, "-m", "heet_tui.cli.main", "run", "--hosts", str(hosts), "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("controller running:") and "plans wait for approval" in first, first
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc, out, err, state


def test_a_controller_stopped_by_sigterm_logs_why(tmp_path: Path) -> None:
    proc, out, err, state = _stopped_by(tmp_path, signal.SIGTERM)
    assert proc.returncode == 0, err
    assert "controller stopped: 0 done, 0 failed, 0 cancelled in this run, 0 still active" in out
    log = (state / "controller.log").read_text()
    assert "INFO heet_tui.events: controller: controller started: 1 host(s)" in log
    assert "controller stopping (SIGTERM received)" in log


def test_stopping_with_a_job_running_says_it_trains_on_and_is_picked_up_again(tmp_path: Path) -> None:
    """"1 still active" read as work lost; the job runs on, and the next controller adopts it."""
    from control_lab import run_and_clean, write_job

    from heet_tui.control.store import Store

    hosts, state = write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]), tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    cli = [sys.executable, "-m", "heet_tui.cli.main", "--hosts", str(hosts), "--state", str(state)]
    spec = write_job(tmp_path, "long", steps=100_000, max_gpus=1)
    assert subprocess.run([*cli, "submit", str(spec)], env=env, capture_output=True, timeout=60).returncode == 0

    async def scenario() -> None:
        proc = subprocess.Popen([*cli, "run", "--auto-approve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert "; auto-approve on: plans apply without asking" in first, "said, as the store remembers it"
            for line in proc.stdout:  # the run's event lines
                if " launch " in line:
                    break
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        assert f"1 job(s) train on, unwatched; the next heet-tui run (or TUI) on {state} picks them up" in out
        assert Store(state).job("long").job.state.value == "running"


    run_and_clean(scenario, tmp_path)


def test_the_controller_log_holds_what_other_heet_tui_commands_did(tmp_path: Path) -> None:
    """The log said it held every event; a submit, cancel or retry from the CLI was in none of it
    (each was logged in its own short-lived process, where no log file listens)."""
    import asyncio

    from control_lab import run_and_clean, wait_for, write_job

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller, ControllerOptions
    from heet_tui.control.log_file import LOG_NAME
    from heet_tui.control.store import Store

    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "by-cli", steps=10, max_gpus=1)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
            done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "heet_tui.cli.main", "submit",
                                                            str(spec), "--state", str(store.dir)],
                                           capture_output=True, text=True, env=env, timeout=60)
            assert done.returncode == 0, done.stderr
            log = store.dir / LOG_NAME
            await wait_for(ctl, lambda s: "submit: submitted by-cli" in log.read_text(), 30, "the submit in the log")
            assert "(from another heet-tui command)" in log.read_text()
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_dropped_session_sighup_stops_the_controller_in_order(tmp_path: Path) -> None:
    """SIGHUP (the SSH session to the login node dropped) killed `heet-tui run` at once: exit 129,
    no "controller stopping" in its log. Its terminal is gone then: the lines it writes are lost,
    not its orderly stop (as with `run | tee` and a Ctrl-C that ended tee too)."""
    hosts, state = write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]), tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    # started as a login shell starts it, SIGHUP at its default: a suite run under nohup (or from a
    # shell that ignores it) passed it on ignored, and `run` then rightly took itself for nohup'd
    proc = subprocess.Popen([sys.executable, "-m", "heet_tui.cli.main", "run", "--hosts", str(hosts), "--state",
                             str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("controller running:")
        proc.stdout.close()  # the reader is gone: what it prints from now on has nowhere to go
        proc.send_signal(signal.SIGHUP)
        proc.stdout = None  # closed above; stderr is read as it waits (a full pipe would hold it up)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired as exc:  # what it said, to see where it hung
            raise AssertionError(f"not stopped 60 s after SIGHUP; its stderr: {exc.stderr!r}; its log: "
                                 f"{(state / 'controller.log').read_text()[-3000:]}") from None
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "controller stopping (SIGHUP received)" in (state / "controller.log").read_text()


def test_ctrl_c_stops_in_order_and_exits_130(tmp_path: Path) -> None:
    """README: "130 stopped by Ctrl-C"; `run` stopped by Ctrl-C exited 0, like a clean end."""
    proc, out, err, state = _stopped_by(tmp_path, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "controller stopped: 0 done" in out
    assert "controller stopping (SIGINT received)" in (state / "controller.log").read_text()


def test_a_controller_started_under_nohup_survives_sighup(tmp_path: Path) -> None:
    """`nohup heet-tui run &` stopped when the SSH session it was started from dropped: SIGHUP was
    handled as a stop though nohup had left it ignored."""
    hosts, state = write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]), tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.Popen(["nohup", sys.executable, "-m", "heet_tui.cli.main", "run", "--hosts", str(hosts),
                             "--state", str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("controller running:")
        proc.send_signal(signal.SIGHUP)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        assert proc.poll() is None, "stopped by the SIGHUP nohup ignores"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0
    log = (state / "controller.log").read_text()
    assert "SIGHUP" not in log and "controller stopping (SIGTERM received)" in log


def test_until_idle_stopped_before_its_jobs_end_does_not_exit_0(tmp_path: Path) -> None:
    """A supervisor's SIGTERM ended `run --until-idle` with 0, read as "every job ended, none failed"."""
    from control_lab import write_job

    hosts, state = write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]), tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    cli = [sys.executable, "-m", "heet_tui.cli.main", "--hosts", str(hosts), "--state", str(state)]
    spec = write_job(tmp_path, "long", steps=100_000, max_gpus=1, command=["sleep", "600"])
    assert subprocess.run([*cli, "submit", str(spec)], env=env, capture_output=True, timeout=60).returncode == 0
    proc = subprocess.Popen([*cli, "run", "--until-idle", "--no-profile"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("controller running:")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
