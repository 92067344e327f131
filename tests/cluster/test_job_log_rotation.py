"""A job's log stays within its bound while the job runs (remote/job_logs.py), and neither
progress forwarding nor the log tail loses track of it across rotations."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap

from heet_agent import log_follow
from heet_agent.job_logs import MAX_LINE_CHARS, read_tail, rotate
from helpers import make_cluster, wait_until

from heet_tui.cluster import JobProgress

CHATTY = textwrap.dedent("""
    import json, sys, time
    pad = "x" * 80
    for step in range(1, 3001):
        print("@heet-progress " + json.dumps({"step": step, "samples": step * 8, "samples_per_s": 80.0, "pad": pad}))
        sys.stdout.flush()
        time.sleep(0.002)
    print("the last line", flush=True)
    time.sleep(60)
""")


def test_the_tail_reads_on_into_the_rotated_part(tmp_path) -> None:
    log = tmp_path / "job.log"
    log.write_text("".join(f"line {i}\n" for i in range(10)))
    assert rotate(str(log)) == 70, "the bytes moved"
    assert log.read_text() == "" and (tmp_path / "job.log.1").read_text().startswith("line 0\n")
    with open(log, "a") as fh:
        fh.write("line 10\nline 11\n")
    assert read_tail(str(log), 4) == ["line 8", "line 9", "line 10", "line 11"]
    assert read_tail(str(log), 2) == ["line 10", "line 11"]
    assert rotate(str(tmp_path / "missing.log")) is None, "a log that cannot be read is left alone"


def test_what_the_job_writes_while_the_copy_is_put_in_place_stays(tmp_path, monkeypatch) -> None:
    """The copy's rename came between the read that found the log's end and its truncation: a
    job printing a line every few microseconds lost hundreds per rotation, and the chatty job
    below its last progress line (CI saw its steps stop at 2999 of 3000)."""
    log = tmp_path / "job.log"
    log.write_text("".join(f"line {i}\n" for i in range(10)))
    real_replace = os.replace

    def replace_while_the_job_writes(src, dst):
        with open(log, "a") as fh:
            fh.write("written during the rename\n")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_while_the_job_writes)
    assert rotate(str(log)) == 70
    assert log.read_text() == "written during the rename\n"
    assert (tmp_path / "job.log.1").read_text() == "".join(f"line {i}\n" for i in range(10))


def _progress(step: int) -> str:
    return "@heet-progress " + json.dumps({"step": step, "samples": step * 8, "samples_per_s": 80.0}) + "\n"


def test_what_the_job_writes_while_its_log_is_rotated_is_forwarded(tmp_path, monkeypatch) -> None:
    """The job writes on while the agent copies its log: the lines after the agent's read went
    into the copy and were never forwarded, so a job's last progress line could be lost for good
    (the controller then saw it end short of its last step)."""
    log = tmp_path / "job.log"
    log.write_text("".join(_progress(step) for step in range(1, 40)))
    real_rotate = log_follow.rotate

    def rotate_while_the_job_writes(path: str):
        with open(path, "a") as fh:
            fh.write(_progress(40))
        return real_rotate(path)

    monkeypatch.setattr(log_follow, "rotate", rotate_while_the_job_writes)
    job = {"log": str(log), "log_max": 1000, "offset": 0, "job_id": "j", "generation": 1}
    sent: list[tuple[str, dict]] = []
    log_follow.follow_log(job, lambda kind, **fields: sent.append((kind, fields)))
    assert [(kind, fields["progress"]["step"]) for kind, fields in sent] == [("progress", 40)]
    assert log.read_text() == "" and job["offset"] == 0
    assert (tmp_path / "job.log.1").read_text().endswith(_progress(40))


def test_a_last_line_longer_than_the_read_shows_its_end(tmp_path) -> None:
    """`log -n 500` printed no line at all when the script's last line was 200,000 characters."""
    log = tmp_path / "job.log"
    log.write_text("short 0\n" + "y" * 199_999 + "z\n")
    short, tail = read_tail(str(log), 500)
    assert short == "short 0" and tail.startswith("yyy") and tail.endswith("yz") and len(tail) < 5000
    assert f"[... {200_000 - MAX_LINE_CHARS} characters ...]" in tail


def test_lines_longer_than_one_read_are_each_shown_by_start_and_end(tmp_path) -> None:
    """A script printing 200,000-character lines: `log -n 50` showed only the progress line
    after the last of them, and nothing said the others were there."""
    log = tmp_path / "job.log"
    log.write_text("".join(f"L{i}:" + "x" * 200_000 + f"|END{i}\n@heet-progress step {i}\n" for i in range(12)))
    tail = read_tail(str(log), 50)
    assert [line.split(":")[0] for line in tail[::2]] == [f"L{i}" for i in range(12)], "every long line, none dropped"
    assert all(line.endswith(f"|END{i}") for i, line in enumerate(tail[::2]))
    assert tail[1::2] == [f"@heet-progress step {i}" for i in range(12)]
    assert read_tail(str(log), 3)[0].startswith("@heet-progress step 10"), "only as far back as asked"


def test_a_tail_is_read_no_further_back_than_the_scan_bound(tmp_path) -> None:
    log = tmp_path / "job.log"
    line = "w" * 1_000_000
    log.write_text(f"{line}\n" * 6)
    tail = read_tail(str(log), 50)
    assert len(tail) == 5 and tail[0].startswith("[...] www"), "the line cut by the bound is marked"
    assert sum(map(len, tail)) < 6 * MAX_LINE_CHARS


def test_a_chatty_job_log_is_bounded_and_still_followed(tmp_path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
                    f'workdir = "{tmp_path / "work"}"\nemulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n')
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    bound = 20_000

    async def scenario() -> None:
        cluster = make_cluster(path)
        steps: list[int] = []
        events = cluster.events()

        async def collect() -> None:
            async for event in events:
                if isinstance(event, JobProgress):
                    steps.append(int(event.progress["step"]))

        collector = asyncio.ensure_future(collect())
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            job = await cluster.launch("here", "chatty", 1, [sys.executable, str(script)], log_max_bytes=bound)
            assert await wait_until(lambda: steps and steps[-1] == 3000, 60), steps[-3:]
            for _ in range(50):
                tail = await cluster.log_tail("here", "chatty", 200)
                if tail[-1:] == ("the last line",):
                    break
                await asyncio.sleep(0.2)
            assert tail[-1] == "the last line" and tail[-2].startswith('@heet-progress {"step": 3000,')
            shown = [json.loads(line.split(" ", 1)[1])["step"] for line in tail[:-1]]
            assert shown == sorted(set(shown)) and shown[-1] == 3000, "in order across the rotation, none twice"
            # the copy the last rotation made holds at least `bound` bytes: read, it gives at least as many
            # lines as fit in them (the lines are ~160 bytes: "bound // 150" failed when the last rotation
            # came after the last line, and the tail was that copy alone)
            longest = max(len(line) for line in tail) + 1
            assert len(tail) >= bound // longest, "the lines from before the last rotation are in the tail"
            written = 3000 * 150
            size, kept = os.path.getsize(job.log), os.path.getsize(job.log + ".1")
            assert size + kept < written / 4, (size, kept)
            assert kept <= bound * 4, "rotated soon after passing the bound"
            assert steps == sorted(steps) and len(steps) > 10
            await cluster.stop_job("here", "chatty", grace_s=1.0)
        finally:
            collector.cancel()
            await cluster.stop()

    asyncio.run(scenario())
