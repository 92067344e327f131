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


def test_new_lines_continue_from_the_overlap_and_a_new_run_from_its_header() -> None:
    from heet_tui.cli.commands.log import new_lines

    first, again = "a generation 1, rank 0 on h, last 3 line(s):", "a generation 1, rank 0 on h, last 500 line(s):"
    assert new_lines((first, "x", "y", "z"), (again, "x", "y", "z", "w")) == (["w"], False)
    assert new_lines((first, "y", "y"), (again, "y", "y", "y")) == (["y"], False), "repeated lines are not lost"
    assert new_lines((first, "x"), (again, "p", "q")) == (["p", "q"], True), "more came than one read holds"
    whole = (again, *(f"step {i}" for i in range(1, 30)))  # the first -f read holds lines -n did not show
    assert new_lines((first, "step 27", "step 28"), whole) == (["step 29"], False), "the log is not printed twice"
    assert new_lines((again, *whole[3:]), (again, *whole[5:], "step 30")) == (["step 30"], False), "a steady follow"
    moved = ("a generation 2, rank 0 on g, last 1 line(s):", "n")
    assert new_lines((first, "x"), moved) == (list(moved), False)


def test_a_progress_bar_redrawn_since_the_last_read_is_shown_once_more_not_the_whole_log() -> None:
    """tqdm redraws its bar after \\r, so the log's unfinished last line differs at every read:
    ``log -f`` printed "..." and the whole tail again every 2 s."""
    from heet_tui.cli.commands.log import new_lines

    head = "a generation 1, rank 0 on h, last 500 line(s):"
    shown = (head, "starting", "@heet-progress step 4", "train 25%|##  | 11/40")
    now = (head, "starting", "@heet-progress step 4", "train 30%|### | 12/40", "@heet-progress step 8",
           "train 35%|### | 14/40")
    assert new_lines(shown, now) == (["train 30%|### | 12/40", "@heet-progress step 8", "train 35%|### | 14/40"],
                                     False)
    steady = (head, "@heet-progress step 4", "train 30%|### | 12/40")
    assert new_lines(shown, steady) == (["train 30%|### | 12/40"], False), "a full read that starts inside the last"


def test_a_read_that_begins_inside_a_long_line_is_matched_without_it() -> None:
    """Each read of a log of 300,000-character lines began with the end of a line, cut at another
    place each time ("[...] ijabc...-END31"): ``log -f`` printed the whole tail again every read
    and said lines had been skipped."""
    from heet_tui.cli.commands.log import new_lines

    head = "a generation 1, rank 0 on h, last 500 line(s):"
    shown = (head, "[...] cdefghij-END29", "START30 [... 290000 characters ...] -END30", "short line 30")
    now = (head, "[...] ghij-END30", "short line 30", "START31 [... 290000 characters ...] -END31", "short line 31")
    assert new_lines(shown, now) == (["START31 [... 290000 characters ...] -END31", "short line 31"], False)


HEAD = "a generation 1, rank 0 on h, last {} line(s):"


def _follow_with(tmp_path: Path, monkeypatch, replies: list | None = None, answer=None) -> None:
    """``log a -n 1 -f`` against a controller that answers ``replies`` in turn: a reply, an
    exception to raise, or "hang" (no answer in time); the job ends before the last read. Or
    ``answer(store, lines)``, a coroutine that makes each reply (and ends the job itself)."""
    from heet_tui.cli.commands import log as log_cli
    from heet_tui.config.job_spec import parse_job_text

    store = Store(tmp_path / "state")
    store.add_job(parse_job_text('name = "a"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\n'
                                 "target = { steps = 10 }\n", tmp_path / "a.toml"), 1.0)
    store.set_state("a", JobState.RUNNING, 2.0)

    async def in_turn(store: Store, lines: int):
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if reply == "hang":
            await asyncio.sleep(30)
        if len(replies) == 1:
            store.set_state("a", JobState.DONE, 3.0)  # one read more follows: its last lines
        return reply

    class Backend:
        gone = None

        def __init__(self, _state) -> None: ...

        async def start(self) -> None: ...

        async def stop(self) -> None: ...

        async def job_log(self, job_id, lines, rank=0, generation=None):
            return await (answer or in_turn)(store, lines)

    monkeypatch.setattr(log_cli, "AttachedBackend", Backend)
    monkeypatch.setattr(log_cli, "FOLLOW_EVERY_S", 0.0)
    monkeypatch.setattr(log_cli, "REPLY_TIMEOUT_S", 0.1)
    asyncio.run(log_cli._ask(store, "a", 1, True))


def test_log_follow_waits_out_a_host_that_drops_and_goes_on(tmp_path: Path, monkeypatch, capsys) -> None:
    """Seen: log -f ended with "cannot read its log on node2: host node2 is unreachable" while the
    job ran on there (a host out is given a grace period before its jobs count as lost)."""
    out = ValueError("a: cannot read its log on h: host h is unreachable")
    _follow_with(tmp_path, monkeypatch, [(HEAD.format(1), "step 1"), out, out, (HEAD.format(500), "step 1", "step 2"),
                                         (HEAD.format(500), "step 1", "step 2", "step 3")])
    out, err = capsys.readouterr()
    assert out.splitlines() == [HEAD.format(1), "step 1", "step 2", "step 3"], "its remarks go to stderr"
    assert err.splitlines() == [
        "(a: cannot read its log on h: host h is unreachable; still following while the job is running)", "(a is done)"]


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
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_log_follow_goes_on_through_a_controller_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen: restarting the controller (an upgrade) while jobs ran left every open ``log -f`` silent
    for good; the jobs ran on, and their followers had to be found and restarted by hand."""
    out = _follow_to_the_end(tmp_path, capsys, 150, restart=True)
    assert any("stopped" in line and "still following: waiting for a controller" in line for line in out), out
    assert any(line.startswith("(following again through the controller, pid") for line in out), out
    steps = _steps(out)
    assert steps == sorted(set(steps)) and steps[-1] == 150, steps


def test_log_follow_waits_out_a_controller_that_does_not_answer(tmp_path: Path, monkeypatch, capsys) -> None:
    """Seen: the controller stopped with kill -STOP for a minute; `log -f` ended with "the
    controller did not answer in time" (exit 1) while the job ran on."""
    _follow_with(tmp_path, monkeypatch, [(HEAD.format(1), "step 1"), "hang", "hang",
                                         (HEAD.format(500), "step 1", "step 2"),
                                         (HEAD.format(500), "step 1", "step 2", "step 3")])
    out, err = capsys.readouterr()
    assert out.splitlines() == [HEAD.format(1), "step 1", "step 2", "step 3"]
    assert err.splitlines() == ["(the controller has not answered for 0.1 s; still following)", "(a is done)"]


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


def test_log_follow_catches_up_on_more_lines_than_one_read_holds(tmp_path: Path, monkeypatch, capsys) -> None:
    """After a 90 s cut of its host, `log -f` jumped from seq 990 to seq 1106: a read holds the
    last 500 lines, and more had come since the last one. It reads back further first."""
    written = [f"seq {i}" for i in range(1, 3)]
    asked = []

    async def answer(store: Store, lines: int):
        asked.append(lines)
        if len(asked) == 2:  # the host was out a while: 1,200 lines came
            written.extend(f"seq {i}" for i in range(3, 1203))
        if len(asked) == 4:
            store.set_state("a", JobState.DONE, 3.0)
        return (HEAD.format(1), *written[-lines:])

    _follow_with(tmp_path, monkeypatch, answer=answer)
    out, err = capsys.readouterr()
    assert out.splitlines() == [HEAD.format(1), *(f"seq {i}" for i in range(2, 1203))], (out[-300:], asked)
    assert "were not shown" not in err, err


def test_log_follow_started_before_the_first_line_shows_a_burst_whole(tmp_path: Path, monkeypatch, capsys) -> None:
    """`log -f` right after approve, on a run that then printed 2,000 lines at once: it showed the
    last 500, and said nothing of the 1,500 before (nothing had been shown to overlap with)."""
    asked = []

    async def answer(store: Store, lines: int):
        asked.append(lines)
        written = [] if len(asked) == 1 else [f"line {i}" for i in range(2000)]
        if len(asked) == 3:
            store.set_state("a", JobState.DONE, 3.0)
        return (HEAD.format(1), *written[-lines:])

    _follow_with(tmp_path, monkeypatch, answer=answer)
    out, err = capsys.readouterr()
    assert out.splitlines() == [HEAD.format(1), *(f"line {i}" for i in range(2000))], (out[:300], asked)
    assert "were not shown" not in err, err
