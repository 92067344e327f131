"""A TUI attaches to a controller another process runs (control/attach.py, control/wire.py).

Seen: with `heet-tui run` going in tmux, opening `heet-tui` on the same state showed only the
hosts file and "another controller is running".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from control_lab import run_and_clean, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.attach import MAX_SOCKET_PATH, socket_path
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.snapshots import ControllerLock
from heet_tui.control.store import Store
from heet_tui.control.wire import WireError, intent_from_obj, intent_to_obj, snapshot_from_obj, to_obj
from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.intents import CancelJob, EditJob, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect
from heet_tui.core.sched_input import Constraints
from heet_tui.core.snapshot import HostStatus, JobProfile, JobStatus, ProfileCell, Snapshot

JOB = 'name = "a"\ncommand = ["true"]\nmodel = "cifar10"\nbatch_size = 32\ntarget = { steps = 10 }\n'


def _snapshot() -> Snapshot:
    alloc = Allocation.of("a", "A100", {"h1": [0, 1]})
    plan = Plan.build({}, {"a": alloc}, "heet", 5.0, PredictedEffect((JobPrediction("a", 0.0, 9.5, None, 30.0),), 40.0))
    host = HostStatus("h1", HostState.READY, "ok [x]", (Gpu(0, "A100", utilization=None), Gpu(1, "A100")),
                      gpu_jobs=((0, "a"),), last_seen=None)
    job = JobStatus("a", "a", JobState.QUEUED, "cifar10", None, log_tail=("line",))
    return Snapshot(7.0, (host,), (job,), plan, 3, (JobProfile("a", (ProfileCell("A100", "2", 9.5, False, 0.3),)),),
                    notices=("n",))


def test_a_snapshot_and_intents_cross_the_wire_unchanged() -> None:
    snap = _snapshot()
    assert snapshot_from_obj(json.loads(json.dumps(to_obj(snap)))) == snap
    edit = EditJob(3, "a", Constraints("A100", 2, ("h1",), False))
    assert intent_from_obj(json.loads(json.dumps(intent_to_obj(edit)))) == edit


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda o: o["hosts"][0].update(state="exploded"), "$.hosts[0].state: 'exploded' is not a HostState"),
    (lambda o: o["jobs"][0].update(progress="half"), "$.jobs[0].progress: expected a number"),
    (lambda o: o.pop("now"), "Snapshot lacks 'now'"),
    (lambda o: o["plan"]["allocations"]["a"].update(hosts=[["h1"]]), "expected 2 items"),
])
def test_a_bad_snapshot_is_refused_naming_the_bad_value(mutate, expected: str) -> None:
    obj = json.loads(json.dumps(to_obj(_snapshot())))
    mutate(obj)
    with pytest.raises(WireError, match=expected.replace("[", r"\[").replace("$", r"\$")):
        snapshot_from_obj(obj)
    with pytest.raises(WireError, match="not an intent"):
        intent_from_obj({"type": "RmRf", "fields": {}})


def test_a_state_dir_too_deep_for_a_socket_gets_a_private_short_path(tmp_path: Path, monkeypatch) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="run", dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        shallow = Path("/tmp/s")
        assert socket_path(shallow) == shallow / "controller.sock"
        deep = tmp_path / ("d" * 120)
        path = socket_path(deep)
        assert len(str(path)) <= MAX_SOCKET_PATH and path.parent == runtime / path.parent.name
        assert path == socket_path(deep), "both sides find the same path"
    finally:
        runtime.rmdir()


def test_a_runtime_dir_too_deep_for_a_socket_is_passed_over(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("r" * 90)))
    path = socket_path(tmp_path / ("d" * 120))
    assert len(os.fsencode(path)) <= MAX_SOCKET_PATH
    assert path.parent.parent in (Path(tempfile.gettempdir()), Path("/tmp"))


def test_a_tui_attaches_sees_snapshots_submits_and_learns_when_the_controller_stops(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    state = tmp_path / "state"
    (tmp_path / "a.toml").write_text(JOB)

    async def scenario() -> None:
        ctl = Controller(hosts, Store(state), ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        client = AttachedBackend(state)
        stream = None
        try:
            assert stat.S_IMODE(client.path.stat().st_mode) == 0o600
            await client.start()
            assert client.pid is not None
            stream = client.snapshots()
            first = await asyncio.wait_for(anext(stream), 10)
            assert [h.name for h in first.hosts] == ["only"]
            assert ctl.store.setting("hosts_path") == str((tmp_path / "hosts.toml").resolve())
            assert await client.post(SubmitJob(str(tmp_path / "a.toml"))) == "submitted a"
            for _ in range(50):
                snap = await asyncio.wait_for(anext(stream), 10)
                if any(j.id == "a" for j in snap.jobs):
                    break
            else:
                raise AssertionError("the submitted job never showed in the attached stream")
            with pytest.raises(ValueError, match="no job 'nope'"):
                await client.post(CancelJob("nope"))
        finally:
            await ctl.stop()
        with pytest.raises(ControllerGone, match="stopped"):
            while True:
                await asyncio.wait_for(anext(stream), 10)
        with pytest.raises(ValueError):
            await client.post(CancelJob("a"))
        await client.stop()
        assert not client.path.exists(), "the socket goes with the controller"

    run_and_clean(scenario, tmp_path)


def test_the_tui_attaches_when_a_controller_holds_the_state(tmp_path: Path) -> None:
    from heet_tui.ui.backends import choose_backend

    state = tmp_path / "state"
    served = tmp_path / "lab-hosts.toml"  # what the running controller was started with
    store = Store(state)
    store.set_setting("hosts_path", str(served))
    store.close()
    lock = ControllerLock(state)
    lock.acquire()
    try:
        args = argparse.Namespace(hosts=str(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)])),
                                  state=str(state), demo=False)
        choice = choose_backend(args)
    finally:
        lock.release()
    assert choice.backend is not None and choice.start_mode == "cluster"
    assert "attached to the controller" in choice.notice
    assert choice.hosts_path == served, "the Hosts screen shows the file the controller follows"


def test_a_broken_hosts_file_here_does_not_stop_the_tui_attaching(tmp_path: Path) -> None:
    """Attaching needs no hosts file; before, the TUI opened on this file's error instead."""
    from heet_tui.ui.backends import choose_backend

    state = tmp_path / "state"
    Store(state).close()
    broken = tmp_path / "hosts.toml"
    broken.write_text("[[hosts]\nname = 'x'\n")
    lock = ControllerLock(state)
    lock.acquire()
    try:
        choice = choose_backend(argparse.Namespace(hosts=str(broken), state=str(state), demo=False))
    finally:
        lock.release()
    assert choice.backend is not None and "attached to the controller" in choice.notice, choice.notice


def test_garbage_on_the_socket_gets_an_error_reply_and_the_connection_carries_on(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    state = tmp_path / "state"

    async def scenario() -> None:
        ctl = Controller(hosts, Store(state), ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
            reader, writer = await asyncio.open_unix_connection(str(ctl.attach_server.path), limit=1 << 24)
            replies = []
            writer.write(b"not json\n")
            writer.write(b'{"op": "post", "id": 2, "intent": {"type": "RmRf", "fields": {}}}\n')
            writer.write(b'{"op": "post", "id": 3, "intent": {"type": "SetAutoApprove", "fields": {"enabled": true}}}\n')
            await writer.drain()
            while len(replies) < 3:
                message = json.loads(await asyncio.wait_for(reader.readline(), 10))
                if message["op"] == "result":
                    replies.append(message)
            by_id = {r["id"]: r for r in replies}
            assert not by_id[None]["ok"] and "not a JSON line" in by_id[None]["error"]
            assert not by_id[2]["ok"] and "not an intent" in by_id[2]["error"]
            assert by_id[3]["ok"] and ctl.auto_approve
            writer.close()
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="serving a socket as another user needs root")
def test_a_socket_another_user_serves_is_not_attached_to(tmp_path: Path) -> None:
    """With a long --state path the socket sits in /tmp/heet-tui-UID/, a directory another user can
    make first: their server's fake snapshots were shown, and the intents went to them."""
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    state = tmp_path / "state"
    served = Path(tempfile.mkdtemp(prefix="heet-attach-"))  # under /tmp: the other user must reach it
    served.chmod(0o777)
    fake = served / "fake.sock"
    code = ("import os, socket, time; os.setgid(65534); os.setuid(65534); s = socket.socket(socket.AF_UNIX); "
            f"s.bind({str(fake)!r}); s.listen(); c, _ = s.accept(); "
            "c.sendall(b'{\"op\": \"hello\", \"version\": 1, \"pid\": 1}\\n'); time.sleep(5)")
    server = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(100):
            if fake.exists():
                break
            time.sleep(0.05)
        backend = AttachedBackend(state)
        backend.path = fake  # where socket_path() put it for a long --state, made by someone else first
        with pytest.raises(ControllerGone, match=r"is served by another user \(uid 65534\)"):
            asyncio.run(backend.start())
    finally:
        server.kill()
        shutil.rmtree(served, ignore_errors=True)


def test_a_controller_that_does_not_answer_is_said_to_be_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller stopped with kill -STOP: status said "cannot attach to the controller at ...: "
    with nothing after the colon."""
    import heet_tui.control.attach_client as attach_client

    monkeypatch.setattr(attach_client, "CONNECT_TIMEOUT_S", 0.3)
    path = tmp_path / "mute.sock"

    async def scenario() -> str:
        server = await asyncio.start_unix_server(lambda r, w: None, path=str(path))  # accepts, never says hello
        try:
            backend = AttachedBackend(tmp_path / "state")
            backend.path = path
            with pytest.raises(ControllerGone) as info:
                await backend.start()
            return str(info.value)
        finally:
            server.close()

    said = asyncio.run(scenario())
    assert said.endswith("it did not answer within 0.3 s (busy, or stopped with kill -STOP?)"), said


def test_a_controller_that_stops_in_the_middle_of_a_snapshot_is_said_to_have_stopped(tmp_path: Path) -> None:
    """The attached TUI said "the controller's connection failed: not a JSON line: Unterminated
    string starting at: line 1 column 219257" when its controller stopped mid-snapshot."""
    from heet_tui.control.attach_client import VERSION
    from heet_tui.control.wire import encode

    path = tmp_path / "cut.sock"

    async def cut_off(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(encode({"op": "hello", "version": VERSION, "pid": 4242}))
        writer.write(b'{"op":"snapshot","snapshot":{"now":1.0,"hosts":[{"name":"a')  # and no more
        await writer.drain()
        writer.close()

    async def scenario() -> str:
        server = await asyncio.start_unix_server(cut_off, path=str(path))
        try:
            backend = AttachedBackend(tmp_path / "state")
            backend.path = path
            await backend.start()
            with pytest.raises(ControllerGone) as info:
                async for _ in backend.snapshots():
                    pass
            return str(info.value)
        finally:
            server.close()

    said = asyncio.run(scenario())
    assert said.startswith("the controller (pid 4242) stopped"), said


@pytest.mark.skipif(os.getuid() != 0, reason="a directory of another user needs root")
def test_a_socket_directory_someone_else_made_first_is_named_with_its_owner(tmp_path: Path) -> None:
    """Another user who made /tmp/heet-tui-<uid> first switched attaching off; the message said
    neither who made it nor what to do."""
    from heet_tui.control.attach import _private_parent

    made = tmp_path / "heet-tui-0"
    made.mkdir(mode=0o700)
    os.chown(made, 65534, 65534)
    with pytest.raises(OSError, match=r"and nobody \(uid 65534\) made it: have it removed"):
        _private_parent(made / "x.sock")
    # a link of theirs to a private directory of ours: the socket went there, and they could re-point it
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    made.rmdir()
    made.symlink_to(mine)
    os.lchown(made, 65534, 65534)
    with pytest.raises(OSError, match=r"heet-tui-0 is a link nobody \(uid 65534\) made, not a directory of yours"):
        _private_parent(made / "x.sock")
    assert list(mine.iterdir()) == []
