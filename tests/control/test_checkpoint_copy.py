"""Copying a checkpoint between hosts without a shared filesystem: local files and real SFTP over sshd."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sshd import SshLab

from heet_tui.cluster import ClusterOptions
from heet_tui.config.hosts_file import HostEntry, HostsFile, load_hosts
from heet_tui.control.checkpoint_copy import Copied, CopyFailed, copy_checkpoint, needs_copy


def test_needs_copy_only_across_filesystems() -> None:
    a = HostEntry("a", "10.0.0.1")
    b = HostEntry("b", "10.0.0.2")
    private = HostEntry("c", "10.0.0.3", shared_fs=False)
    assert not needs_copy(a, b, "/shared/ck", "/shared/ck")
    assert needs_copy(a, private, "/shared/ck", "/shared/ck")
    assert needs_copy(a, b, "/wa/ck", "/wb/ck")
    assert not needs_copy(a, a, "/x", "/y")


@contextlib.contextmanager
def two_private_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SshLab, HostsFile, Path]]:
    """Hosts src and dst over real SSH, sharing no filesystem, and an empty local ``origin`` dir."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    lab = SshLab(tmp_path / "lab")
    try:
        servers = [lab.add_host(n) for n in ("src", "dst")]
        origin = tmp_path / "origin"
        origin.mkdir()
        yield lab, load_hosts(lab.hosts_toml([lab.entry_for(s, shared_fs=False) for s in servers])), origin
    finally:
        lab.close()


def test_copy_over_sftp_between_two_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with two_private_hosts(tmp_path, monkeypatch) as (lab, hosts, origin):
        local = HostEntry("here", "localhost", transport="local")
        (origin / "checkpoint.pt").write_bytes(bytes(range(256)) * 400)
        (origin / "checkpoint.json").write_text('{"step": 40, "generation": 2}')
        (origin / ".checkpoint.pt.123.tmp").write_text("half-written")
        (origin / ".heet-owner").write_text("deadbeef\n")  # each host's agent writes its own: never copied
        secret = tmp_path / "id_ed25519"
        secret.write_text("a private key")
        (origin / "key").symlink_to(secret)  # a link copied what it points at to the other host
        (origin / "latest").symlink_to("checkpoint.pt")  # one inside the directory is copied, as a file
        (origin / "step-100").mkdir()  # a subdirectory is not: said, it was left behind unsaid
        on_src, on_dst = tmp_path / "on-src" / "ck", tmp_path / "on-dst" / "deep" / "ck"
        opts = ClusterOptions(connect_timeout_s=10.0)
        victim = tmp_path / "victim.txt"
        victim.write_text("mine")
        for where in (on_src, on_dst):  # links planted at the temp names: "wb" wrote through them
            where.mkdir(parents=True)
            (where / ".checkpoint.pt.copy.tmp").symlink_to(victim)

        async def scenario() -> tuple[Copied, Copied]:
            first = await copy_checkpoint(local, str(origin), hosts.host("src"), str(on_src), hosts.ssh_config, opts)
            (on_src / "key").symlink_to(secret)  # and over SFTP
            (on_src / "best").symlink_to("checkpoint.pt")
            (on_src / "sub").mkdir()
            (on_src / ".heet-owner").write_text("deadbeef\n")
            second = await copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(on_dst),
                                           hosts.ssh_config, opts)
            return first, second

        pt, js = 256 * 400, len('{"step": 40, "generation": 2}')
        assert asyncio.run(scenario()) == (Copied(3, 2 * pt + js, ("key", "step-100")),
                                           Copied(4, 3 * pt + js, ("key", "sub"))), "the half-written temp file is not copied"
        assert (on_dst / "best").read_bytes() == (on_dst / "latest").read_bytes() == (origin / "checkpoint.pt").read_bytes()
        assert (on_dst / "checkpoint.pt").read_bytes() == (origin / "checkpoint.pt").read_bytes()
        assert (on_dst / "checkpoint.json").read_text() == '{"step": 40, "generation": 2}'
        assert not (on_dst / "key").exists(), "links are not followed"
        assert not (on_dst / ".heet-owner").exists(), "a planted owner mark failed the job on the next host"
        assert victim.read_text() == "mine", "the planted links were removed, not written through"
        assert asyncio.run(copy_checkpoint(hosts.host("src"), str(tmp_path / "none"), hosts.host("dst"),
                                           str(on_dst), hosts.ssh_config, opts)) == Copied(0, 0), "nothing to copy yet"
        lab.server("src").kill()
        with pytest.raises(CopyFailed, match="src"):
            asyncio.run(copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(on_dst),
                                        hosts.ssh_config, opts))


def test_a_copy_streams_host_to_host_without_the_login_nodes_disk(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """It landed whole in the login node's temp directory first: a checkpoint bigger than the
    free space there failed to copy, and the job restarted from scratch."""
    import tempfile

    from heet_tui.control import checkpoint_copy

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-dir"))  # any use of it fails
    monkeypatch.setattr(checkpoint_copy, "CHUNK", 4096)  # many chunks, several in flight
    lab = SshLab(tmp_path / "lab")
    try:
        servers = [lab.add_host(n) for n in ("src", "dst")]
        hosts = load_hosts(lab.hosts_toml([lab.entry_for(s, shared_fs=False) for s in servers]))
        on_src, on_dst = tmp_path / "on-src", tmp_path / "on-dst"
        on_src.mkdir()
        payload = bytes(range(251)) * 1000  # not a multiple of the chunk
        (on_src / "checkpoint.pt").write_bytes(payload)
        opts = ClusterOptions(connect_timeout_s=10.0)
        done = asyncio.run(copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(on_dst),
                                           hosts.ssh_config, opts))
        assert done == Copied(1, len(payload)) and (on_dst / "checkpoint.pt").read_bytes() == payload

        async def failing_chunks(self, name):  # the source host goes away mid-file
            yield payload[:4096]
            raise ConnectionResetError("connection lost")

        monkeypatch.setattr(checkpoint_copy._SftpDir, "chunks", failing_chunks)
        with pytest.raises(CopyFailed, match="connection lost"):
            asyncio.run(copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(tmp_path / "again"),
                                        hosts.ssh_config, opts))
        assert list((tmp_path / "again").iterdir()) == [], "a copy cut short leaves no file behind"
    finally:
        lab.close()


def test_a_moves_checkpoint_copy_counts_in_its_measured_start_pause(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans weigh moves against the measured pause. The copy ran before the run's clock started,
    so however long it took, it was left out. The link is made slow here (6 s on top of the real
    local copy); the copy, the launch and the training are real."""
    from control_lab import job, moved_by_a_drain, run_and_clean, wait_for, write_job

    from heet_tui.control import checkpoint_hosts
    from heet_tui.control.store import Store

    slow_s = 3.0

    async def slow_copy(*args, **kwargs) -> Copied:
        await asyncio.sleep(slow_s)
        return await copy_checkpoint(*args, **kwargs)

    monkeypatch.setattr(checkpoint_hosts, "copy_checkpoint", slow_copy)
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "mover", steps=600, max_gpus=1, every=10, own_checkpoint_dir=False)

    async def scenario() -> None:
        async with moved_by_a_drain(tmp_path, store, spec, "mover", 30, 90) as (ctl, first):
            await wait_for(ctl, lambda s: job(s, "mover").allocation is not None and first not in
                           job(s, "mover").allocation.host_names and len(_starts(store)) >= 2, 120,
                           "mover started on the other host")

    run_and_clean(scenario, tmp_path)
    stops = [e.message for e in store.events("mover", limit=200) if e.kind == "stopped"]
    assert stops and stops[0].endswith("generation 1: migrate"), "a move read \"stopped ...: resize\""
    copies = [e.message for e in store.events("mover", limit=200) if e.kind == "checkpoint"]
    assert len(copies) == 1 and copies[0].startswith("mover: copied ") and " MB in " in copies[0], copies
    took = float(copies[0].split(" in ")[1].split(" s")[0])
    assert took >= slow_s
    moved_start = _starts(store)[1]
    # (The first start is no yardstick: under load starting torch alone took 8 s, more than the copy.)
    assert moved_start >= took, "the copy is part of the pause the move cost"


def _starts(store) -> list[float]:
    return [s for job_id, phase, s in store.restart_times() if job_id == "mover" and phase == "start"]


QUIET_SCRIPT = """
import json, os, signal, sys, time
ckpt = os.path.join(os.environ["HEET_CHECKPOINT_DIR"], "step.json")
step = json.load(open(ckpt))["step"] if os.path.exists(ckpt) else 0
def save(*_):
    json.dump({"step": step}, open(ckpt, "w"))
def stop(*_):
    save()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
target = int(os.environ["HEET_TARGET_STEPS"])
while step < target:
    time.sleep(0.05)
    step += 1
    if step % 10 == 0:
        save()
    if step % 5 == 0:  # no "checkpoint" key: the docs ask only for step, samples and samples_per_s
        print("@heet-progress " + json.dumps({"step": step, "samples": step * 8, "samples_per_s": 160.0}), flush=True)
save()
"""


def test_a_moved_job_brings_its_checkpoint_though_its_progress_lines_never_name_it(tmp_path: Path) -> None:
    """Seen at scale with per-host workdirs: a script whose progress lines had no "checkpoint" key
    restarted from step 0 after every move, its checkpoint left on the old host (the controller
    remembered where rank 0 ran only for jobs that had reported one)."""
    from control_lab import job, moved_by_a_drain, run_and_clean, wait_for

    from heet_tui.control.store import Store
    from heet_tui.core.job import JobState

    script = tmp_path / "quiet.py"
    script.write_text(QUIET_SCRIPT)
    spec = tmp_path / "quiet.toml"
    spec.write_text(f'name = "quiet"\ncommand = ["python3", "{script}"]\nmodel = "quiet"\nbatch_size = 8\n'
                    "target = { steps = 400 }\n")
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with moved_by_a_drain(tmp_path, store, spec, "quiet", 30, 90) as (ctl, _):
            await wait_for(ctl, lambda s: job(s, "quiet").state is JobState.DONE, 120, "quiet done")

    run_and_clean(scenario, tmp_path)
    events = store.events("quiet", limit=200)
    assert [e for e in events if e.kind == "checkpoint" and e.message.startswith("quiet: copied ")], \
        [e.message for e in events]
    assert not [e for e in events if e.kind == "warning" and "resumed behind" in e.message], \
        [e.message for e in events if e.kind == "warning"]


def test_a_copy_lands_private_and_never_in_a_directory_others_own_or_may_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy made 0755 directories and 0644 files (a 0600 checkpoint became world-readable on
    the new host), and wrote into a 0777 directory another user had made, which the agent then
    refused at launch with the weights already there."""
    import os
    import stat

    with two_private_hosts(tmp_path, monkeypatch) as (lab, hosts, origin):
        local = HostEntry("here", "localhost", transport="local")
        (origin / "checkpoint.pt").write_bytes(b"weights")
        (origin / "checkpoint.pt").chmod(0o600)
        opts = ClusterOptions(connect_timeout_s=10.0)

        def copy(src: HostEntry, dst: HostEntry, to: Path) -> Copied:
            return asyncio.run(copy_checkpoint(src, str(origin), dst, str(to), hosts.ssh_config, opts))

        for dst in (hosts.host("dst"), local):
            to = tmp_path / f"to-{dst.name}" / "job" / "ck"
            assert copy(hosts.host("src"), dst, to) == Copied(1, 7)
            assert stat.S_IMODE((to / "checkpoint.pt").stat().st_mode) == 0o600, dst.name
            assert stat.S_IMODE(to.stat().st_mode) == 0o700, dst.name
            open_to_all = tmp_path / f"open-{dst.name}"
            open_to_all.mkdir()
            open_to_all.chmod(0o777)
            with pytest.raises(CopyFailed, match="may be written by others"):
                copy(hosts.host("src"), dst, open_to_all)
            assert list(open_to_all.iterdir()) == [], "nothing written there, not even the temp file"
            if os.getuid() == 0:  # another user's directory, however its mode
                theirs = tmp_path / f"theirs-{dst.name}"
                theirs.mkdir(mode=0o755)
                os.chown(theirs, 65534, 65534)
                with pytest.raises(CopyFailed, match="belongs to uid 65534"):
                    copy(hosts.host("src"), dst, theirs)
                assert list(theirs.iterdir()) == []


def test_a_job_found_running_after_a_restart_and_stopped_before_it_reported_brings_its_newest_checkpoint(
        tmp_path: Path) -> None:
    """Seen at lab scale: a restarted controller adopted running jobs and preempted them within
    seconds, before their next progress line; the next launch copied the checkpoint of the run
    before (where rank 0 ran was remembered only for runs that had reported to this controller)
    and 14 jobs trained again from older steps, warned as "resumed behind" their own fault."""
    from control_lab import job, run_and_clean, running_past, wait_for, write_local_hosts

    from heet_tui.control.controller import Controller, ControllerOptions
    from heet_tui.control.store import Store
    from heet_tui.core.intents import DrainHost
    from heet_tui.core.job import JobState

    script = tmp_path / "sparse.py"  # reports every 5 steps up to 60, then every 300
    script.write_text(QUIET_SCRIPT.replace("if step % 5 == 0:", "if step % 5 == 0 and (step <= 60 or step % 300 == 0):"))
    spec = tmp_path / "sparse.toml"
    spec.write_text(f'name = "sparse"\ncommand = ["python3", "{script}"]\nmodel = "sparse"\nbatch_size = 8\n'
                    "target = { steps = 400 }\n")
    hosts = load_hosts(write_local_hosts(tmp_path, [("a", "A100", 1, 1.0), ("b", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)
    where: list[str] = []

    async def first_controller() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            first = await running_past(ctl, spec, "sparse", 20, 90)
            await ctl.post(DrainHost(first))
            await wait_for(ctl, lambda s: job(s, "sparse").state is JobState.RUNNING and job(s, "sparse").allocation
                           is not None and job(s, "sparse").allocation.host_names != (first,)
                           and ctl.store.job("sparse").job.steps_done >= 55, 90, "sparse moved and past 55")
            where.append(first)
        finally:
            await ctl.stop()  # the job trains on, its checkpoints on the second host only

    async def second_controller() -> None:
        await asyncio.sleep(1.5)  # some 30 steps more, saved where it runs now
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: any(e.kind == "adopt" for e in ctl.store.events("sparse")), 30, "adopted")
            second = "b" if where[0] == "a" else "a"
            await ctl.post(DrainHost(second))  # stopped before its next progress line
            await ctl.post(DrainHost(where[0], drained=False))
            await wait_for(ctl, lambda s: job(s, "sparse").state is JobState.DONE, 120, "sparse done")
        finally:
            await ctl.stop()

    async def both() -> None:
        await first_controller()
        await second_controller()

    run_and_clean(both, tmp_path)
    warnings = [e.message for e in store.events("sparse", limit=300) if e.kind == "warning"]
    assert not [w for w in warnings if "resumed behind" in w], warnings
    copies = [e.message for e in store.events("sparse", limit=300) if e.kind == "checkpoint"]
    assert len(copies) == 2, copies  # there, and back from the host it was adopted on


def test_a_copy_that_fails_part_way_leaves_none_of_the_checkpoint(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Files were renamed into place one by one: a copy cut after checkpoint.json (first by name)
    left it without its checkpoint.pt, and the job relaunched there claimed the step it names while
    training from 0. Every file is renamed only once all have arrived."""
    with two_private_hosts(tmp_path, monkeypatch) as (lab, hosts, origin):
        (origin / "checkpoint.json").write_text('{"step": 15072, "generation": 4}')
        (origin / "checkpoint.pt").write_bytes(b"weights" * 1000)
        on_dst = tmp_path / "on-dst" / "ck"
        on_dst.mkdir(parents=True)
        (on_dst / ".checkpoint.pt.copy.tmp").mkdir()  # the second file's write fails, as on a full disk
        (on_dst / ".checkpoint.pt.copy.tmp" / "x").write_text("")
        local = HostEntry("here", "localhost", transport="local")
        with pytest.raises(CopyFailed, match="dst"):
            asyncio.run(copy_checkpoint(local, str(origin), hosts.host("dst"), str(on_dst), hosts.ssh_config,
                                        ClusterOptions(connect_timeout_s=10.0)))
        assert sorted(p.name for p in on_dst.iterdir()) == [".checkpoint.pt.copy.tmp"], "nothing of it landed"


def test_a_copy_goes_over_the_connections_the_hosts_agents_run_on(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan moving 15 jobs opened two fresh SSH connections per checkpoint copy, 7-11 s each. With
    both sshd listeners paused, so that no new connection can be made, a copy still goes."""
    import os
    import signal

    from heet_tui.cluster import Cluster

    with two_private_hosts(tmp_path, monkeypatch) as (lab, hosts, _origin):
        opts = ClusterOptions(heartbeat_s=0.5, heartbeat_timeout_s=30.0, connect_timeout_s=3.0, keepalive_s=1.0,
                              probes=())
        on_src, on_dst = tmp_path / "on-src" / "ck", tmp_path / "on-dst" / "ck"
        on_src.mkdir(parents=True)
        (on_src / "checkpoint.pt").write_bytes(b"w" * 5000)
        src, dst = hosts.host("src"), hosts.host("dst")

        async def scenario() -> Copied:
            cluster = Cluster(hosts, opts)
            await cluster.start()
            try:
                assert await cluster.wait_settled(timeout=30)
                listeners = [lab.server(name).process.pid for name in ("src", "dst")]
                for pid in listeners:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    with pytest.raises(CopyFailed):  # the case this test is about: no fresh connection now
                        await copy_checkpoint(src, str(on_src), dst, str(on_dst), hosts.ssh_config, opts)
                    return await copy_checkpoint(src, str(on_src), dst, str(on_dst), hosts.ssh_config, opts,
                                                 cluster.open_sftp)
                finally:
                    for pid in listeners:
                        os.kill(pid, signal.SIGCONT)
            finally:
                await cluster.stop()

        assert asyncio.run(scenario()) == Copied(1, 5000)
        assert (on_dst / "checkpoint.pt").read_bytes() == b"w" * 5000
