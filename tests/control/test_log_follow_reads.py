"""`heet-tui log -f` against a controller that answers as a test says: what each read adds to
what was shown, across a host that drops, a controller that does not answer, bursts and cut lines."""

from __future__ import annotations

import asyncio
from pathlib import Path

from heet_tui.control.store import Store
from heet_tui.core.job import JobState

HEAD = "a generation 1, rank 0 on h, last {} line(s):"


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


def test_log_follow_waits_out_a_controller_that_does_not_answer(tmp_path: Path, monkeypatch, capsys) -> None:
    """Seen: the controller stopped with kill -STOP for a minute; `log -f` ended with "the
    controller did not answer in time" (exit 1) while the job ran on."""
    _follow_with(tmp_path, monkeypatch, [(HEAD.format(1), "step 1"), "hang", "hang",
                                         (HEAD.format(500), "step 1", "step 2"),
                                         (HEAD.format(500), "step 1", "step 2", "step 3")])
    out, err = capsys.readouterr()
    assert out.splitlines() == [HEAD.format(1), "step 1", "step 2", "step 3"]
    assert err.splitlines() == ["(the controller has not answered for 0.1 s; still following)", "(a is done)"]


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

