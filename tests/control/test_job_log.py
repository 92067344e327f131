"""`l` on the Jobs screen and `heet-tui log`: the controller reads a job's rank-0 log from its host on request,
for a TUI of its own or one attached over the socket, while the job runs and after it ended."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.attach_client import AttachedBackend
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import CancelJob, SubmitJob
from heet_tui.core.job import JobState


def test_a_jobs_log_is_read_from_its_host_running_and_ended_and_through_an_attached_tui(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    state = tmp_path / "state"

    async def scenario() -> None:
        ctl = Controller(hosts, Store(state), ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        attached = AttachedBackend(state)
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=1))))
            too_big = write_job(tmp_path, "big", steps=10, max_gpus=4)
            too_big.write_text(too_big.read_text().replace("min_gpus = 1", "min_gpus = 4"))
            await ctl.post(SubmitJob(str(too_big)))
            assert "has not run yet" in (await ctl.job_log("big"))[0]
            await ctl.post(CancelJob("big"))  # "has not run yet" read oddly of a job that ended
            await wait_for(ctl, lambda s: job(s, "big").state is JobState.CANCELLED, 30, "big cancelled")
            assert (await ctl.job_log("big"))[0] == "big never ran (cancelled)"
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and ctl.store.job("a").job.steps_done
                           >= 10, 60, "a reporting")
            running = await ctl.job_log("a", lines=5)
            assert running[0].startswith("a generation 1, rank 0 on solo")
            path = running[0].split("(solo:", 1)[1].removesuffix("):")  # where the whole log is, to copy
            assert path.endswith("-g1.log") and Path(path).is_file() and "@heet-progress" in Path(path).read_text()
            assert 2 <= len(running) <= 6 and any("@heet-progress" in line for line in running[1:])
            await attached.start()
            assert (await attached.job_log("a", 5))[0].startswith("a generation 1, rank 0 on solo")
            await ctl.publish()
            assert ctl.hub.latest.viewers == 1, "counted, for the TUI that runs it to ask before it quits"
            with pytest.raises(ValueError, match="no job 'nope'"):
                await attached.job_log("nope")
            # heet-tui log: the same request from the command line, through the same socket
            assert await asyncio.to_thread(main, ["log", "a", "-n", "3", "--state", str(state)]) == 0
            printed = capsys.readouterr().out.splitlines()
            assert printed[0].startswith("a generation 1, rank 0 on solo") and 2 <= len(printed) <= 4
            await ctl.executor.stop_run(ctl.executor.runs["a"], "cancel")
            await wait_for(ctl, lambda s: job(s, "a").state.terminal, 60, "a to end")
            ended = await ctl.job_log("a", lines=50)
            assert ended[0].startswith("a generation 1, rank 0 on solo") and any(
                "@heet-progress" in line for line in ended), "read after the end"
        finally:
            await attached.stop()
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def _follow_to_the_end(tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: int,
                       restart: bool = False, update: bool = False) -> list[str]:
    """What `heet-tui log a -n 2 -f` prints while job a trains ``steps`` steps to its end, through
    a controller restart when ``restart``, or a relaunch by ``heet-tui update`` when ``update``."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    state = tmp_path / "state"
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)

    async def scenario() -> None:
        ctl = Controller(hosts, Store(state), options)
        await ctl.start()
        try:
            spec = write_job(tmp_path, "a", steps=steps, max_gpus=1)
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            follow = asyncio.create_task(asyncio.to_thread(main, ["log", "a", "-n", "2", "-f", "--state", str(state)]))
            if update:
                await wait_for(ctl, lambda _: ctl.store.job("a").job.steps_done >= 20, 60, "a at step 20")
                spec.write_text(spec.read_text().replace(f"steps = {steps}", f"steps = {steps + 1}"))
                assert await asyncio.to_thread(main, ["update", str(spec), "--state", str(state)]) == 0
            if restart:
                await asyncio.sleep(1.0)
                await ctl.stop()
                assert not follow.done(), "the follow waits for a controller"
                ctl = Controller(hosts, Store(state), options)
                await ctl.start()
            assert await asyncio.wait_for(follow, 120) == 0, "it returns when the job ends"
            assert ctl.store.job("a").job.state is JobState.DONE
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    out, err = capsys.readouterr()
    assert "(" not in "".join(line[:1] for line in out.splitlines()), "remarks go to stderr, not among the lines"
    assert err.splitlines()[-1] == "(a is done)", err
    return out.splitlines() + err.splitlines()


def _steps(out: list[str]) -> list[int]:
    return [json.loads(line.split("@heet-progress ", 1)[1])["step"] for line in out if "@heet-progress" in line]


def test_log_follow_prints_each_line_once_until_the_job_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`heet-tui log NAME -f`: tail -f of a job's output from the login node."""
    steps = _steps(_follow_to_the_end(tmp_path, capsys, 120))
    assert steps == sorted(set(steps)), "each line once, in order"
    assert steps[-1] == 120 and len(steps) >= 3, steps


def test_log_follow_prints_a_relaunched_jobs_last_lines_before_its_new_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    """The lines a run wrote after the follow's last read, its stop among them, came never: the next
    read was of the relaunched run. They say whether the stop saved its checkpoint."""
    from heet_tui.cli.commands import log as log_cli

    monkeypatch.setattr(log_cli, "FOLLOW_EVERY_S", 4.0)  # reads far apart: a relaunch falls between two
    out = _follow_to_the_end(tmp_path, capsys, 400, update=True)
    first = [p for p in tmp_path.rglob("*-g1.log")]
    assert len(first) == 1, first
    written = _steps(first[0].read_text().splitlines())
    shown = _steps(out[:next(i for i, line in enumerate(out) if line.startswith("a generation 2,"))])
    assert written and shown == written[-len(shown):] and shown[-1] == written[-1], (written, shown)




def test_another_ranks_log_is_read_from_its_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job failed on rank 1 ("rank1 boom"): only rank 0's output could be read, and the user
    had to find rank 1's log on its host by hand."""
    from control_lab import training_with

    hosts = load_hosts(write_local_hosts(tmp_path, [("duo", "T4", 2, 1.0)]))
    state = tmp_path / "state"
    says = training_with(tmp_path, "a", "print('I am rank', os.environ['RANK'], file=sys.stderr, flush=True)")
    spec = write_job(tmp_path, "a", steps=60, max_gpus=2, command=[*says, "--checkpoint-every", "20"])
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))

    async def scenario() -> None:
        ctl = Controller(hosts, Store(state), ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 90, "a to finish")
            assert await asyncio.to_thread(main, ["log", "a", "--rank", "1", "--state", str(state)]) == 0
            printed = capsys.readouterr().out
            assert printed.startswith("a generation 1, rank 1 on duo") and "I am rank 1\n" in printed
            assert "I am rank 0" not in printed
            assert await asyncio.to_thread(main, ["log", "a", "--rank", "2", "--state", str(state)]) == 2, "the asker's mistake"
            assert "its latest run had ranks 0-1, not 2" in capsys.readouterr().err
            # a generation by number (log read the latest one only)
            assert await asyncio.to_thread(main, ["log", "a", "--generation", "1", "--rank", "1", "--state",
                                                  str(state)]) == 0
            assert capsys.readouterr().out.startswith("a generation 1, rank 1 on duo")
            assert await asyncio.to_thread(main, ["log", "a", "--generation", "5", "--state", str(state)]) == 2
            assert "heet-tui: a: it has no generation 5 (jobs a lists its runs)" in capsys.readouterr().err
            assert await asyncio.to_thread(main, ["log", "a", "--generation", "1", "--rank", "4", "--state",
                                                  str(state)]) == 2  # "its latest run" was said of generation 1
            assert "a: its generation 1 had ranks 0-1, not 4" in capsys.readouterr().err
            assert await asyncio.to_thread(main, ["log", "a", "--generation", str(10 ** 20), "--state",
                                                  str(state)]) == 2  # it overflowed SQLite, exit 1
            assert await asyncio.to_thread(main, ["log", "a", "--generation", "1", "-f", "--state", str(state)]) == 2
        finally:
            await ctl.stop()
        # with no controller, the store says which generations there were
        assert await asyncio.to_thread(main, ["log", "a", "--generation", "2", "--state", str(state)]) == 2
        assert "a: it has no generation 2" in capsys.readouterr().err

    run_and_clean(scenario, tmp_path)


def test_log_follow_goes_on_through_a_controller_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen: restarting the controller (an upgrade) while jobs ran left every open ``log -f`` silent
    for good; the jobs ran on, and their followers had to be found and restarted by hand."""
    out = _follow_to_the_end(tmp_path, capsys, 150, restart=True)
    assert any("stopped" in line and "still following: waiting for a controller" in line for line in out), out
    assert any(line.startswith("(following again through the controller, pid") for line in out), out
    steps = _steps(out)
    assert steps == sorted(set(steps)) and steps[-1] == 150, steps


def test_the_log_of_a_job_that_failed_while_profiling_is_its_recorded_tail(tmp_path: Path) -> None:
    """It said the job "has not run yet", though it had failed four times with a traceback."""
    from heet_tui.control.execution import ExecOptions

    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    script = tmp_path / "broken.py"
    script.write_text("print('starting')\nthis is not python\n")
    options = ControllerOptions(interval_s=0.2, execution=ExecOptions(retry_backoff_s=0.1))

    async def scenario() -> None:
        ctl = Controller(hosts, Store(tmp_path / "state"), options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "bad", steps=10, max_gpus=1,
                                                   command=[sys.executable, str(script)]))))
            await wait_for(ctl, lambda s: job(s, "bad").state is JobState.FAILED, 90, "bad to fail")
            assert ctl.store.last_allocation("bad") is None, "it never ran outside profiling"
            shown = await ctl.job_log("bad")
        finally:
            await ctl.stop()
        assert shown[0].startswith("bad failed before it ran (profiling), last ")
        assert any("NameError" in line for line in shown[1:]), shown

    run_and_clean(scenario, tmp_path)


def test_a_tail_cut_short_by_the_read_limit_says_so(tmp_path: Path) -> None:
    """`log -n 500` of a job writing long lines printed 66 with nothing said: the agent's reply
    holds at most MAX_TAIL_CHARS characters, whatever was asked."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    wide = [sys.executable, "-c", "import time; print(('x' * 1000 + chr(10)) * 400, flush=True); time.sleep(120)"]

    async def scenario() -> None:
        ctl = Controller(hosts, Store(tmp_path / "state"), ControllerOptions(interval_s=0.2, auto_approve=True,
                                                                             profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=10, max_gpus=1, command=wide))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            for _ in range(100):
                tail = await ctl.job_log("a", lines=500)
                if len(tail) > 200:
                    break
                await asyncio.sleep(0.1)
            assert 200 <= len(tail) - 1 < 400 and tail[0].endswith(
                "; fewer than 500: one tail holds at most 256K characters:"), tail[0]
            assert (await ctl.job_log("a", lines=5))[0].endswith("-g1.log):"), "nothing said when all came"
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


HANG_AFTER_TWO_REPORTS = """
import json, time
for step in (10, 20):
    print("@heet-progress " + json.dumps({"step": step, "samples": step * 8, "samples_per_s": 80.0 + step}), flush=True)
    time.sleep(0.3)
print("now hanging at step 30", flush=True)
time.sleep(600)
"""


def test_a_job_stuck_in_profiling_shows_its_runs_log_and_the_hung_run_is_stopped(tmp_path: Path) -> None:
    """A script that reported twice and then hung: its profiling run held the GPU until cancelled
    (two reports measure nothing, and only runs with fewer were stopped), and `log` said
    "profiling runs keep no log here" while the log that showed why was on the host."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    script = tmp_path / "hang.py"
    script.write_text(HANG_AFTER_TWO_REPORTS)
    spec = write_job(tmp_path, "h", steps=100, max_gpus=1, command=[sys.executable, str(script)],
                     extra="stall_timeout = 4\n")

    async def scenario() -> None:
        ctl = Controller(hosts, Store(tmp_path / "state"), ControllerOptions(interval_s=0.2, auto_approve=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: job(s, "h").state is JobState.PROFILING, 30, "h profiling")
            for _ in range(100):
                shown = await ctl.job_log("h", lines=20)
                if "now hanging at step 30" in shown:
                    break
                await asyncio.sleep(0.2)
            assert shown[0].startswith("h profiling run, generation 1, rank 0 on solo"), shown[0]
            assert "now hanging at step 30" in shown and sum("@heet-progress" in line for line in shown) == 2
            await wait_for(ctl, lambda s: job(s, "h").state is not JobState.PROFILING, 60, "the hung run stopped")
            assert not ctl.executor.profiles.get("h"), "no profiling run holds the GPU"
            said = [e.message for e in ctl.store.events("h") if e.kind == "profile"]
            assert any("h: profiling run on 1xT4 on solo[0] stopped: no progress line for" in m
                       and "(its stall_timeout is 4 s) (what it reported counts)" in m for m in said), said
            again = await ctl.job_log("h", lines=20)
            assert again[0].startswith("h profiling run, generation 1") and "now hanging at step 30" in again
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


