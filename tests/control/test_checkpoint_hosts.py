"""A job whose only checkpoint is on a host that dropped out waits out the host's grace period
(control/checkpoint_hosts.py), and a launch that could not bring its checkpoint says so."""

from __future__ import annotations

from pathlib import Path

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.checkpoint_hosts import CheckpointHosts
from heet_tui.control.progress_reports import note_lost_progress
from heet_tui.control.runtime import Run
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

SPEC = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10_000))


def test_a_job_waits_for_the_host_that_alone_holds_its_checkpoint_while_it_may_come_back(tmp_path: Path) -> None:
    """Seen over SSH: rank 0's host crashed, the job was relaunched on the other host one second
    later, the copy failed ("connection refused") and 2,190 steps were trained again, although
    the controller had just said the host had 60 s to come back."""
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    hosts = CheckpointHosts(store, lambda: 5.0)
    hosts.remember("j", "left")
    own_disks = (HostEntry("left", "n1", shared_fs=False), HostEntry("right", "n2", shared_fs=False))
    assert hosts.out_of_reach("j", set(), own_disks) is None, "the host is up: the copy will do"
    assert hosts.out_of_reach("j", {"left"}, own_disks) == "left"
    assert hosts.out_of_reach("j", {"left"}, own_disks) == "left"
    said = [e for e in store.events("j") if e.kind == "checkpoint"]
    assert len(said) == 1 and "waits for host left, which holds its checkpoint" in said[0].message, "said once"
    assert store.job("j").job.message.startswith("waits for host left") and store.job("j").job.state is JobState.QUEUED
    assert hosts.out_of_reach("j", {"right"}, own_disks) is None, "another host out: nothing to wait for"
    shared = (HostEntry("left", "n1"), HostEntry("right", "n2"))
    assert hosts.out_of_reach("j", {"left"}, shared) is None, "on a shared filesystem every host has it"


def test_a_launch_behind_its_last_one_names_the_checkpoint_copy_that_failed(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    store.add_event(99.0, "checkpoint", "j: copying the checkpoint left:/w/ck -> right:/w/ck failed: connection "
                    "refused; resuming from what right has", "j")
    run = Run("j", Allocation.of("j", "T4", {"right": [0]}), 3, {}, 100.0, reports=1, start_samples=0.0)
    note_lost_progress(store, run, {"step": 20}, {"j": 2190}, 101.0)
    warning = next(e.message for e in store.events("j") if e.kind == "warning")
    assert "about 2170 steps are trained again" in warning
    assert "Its checkpoint could not be brought to this host (copying the checkpoint left:" in warning
    assert "DataLoader" not in warning, "not a guess at the script when the copy is known to have failed"


def test_a_launch_behind_its_last_one_does_not_quote_a_copy_that_failed_before_an_earlier_launch(
        tmp_path: Path) -> None:
    """Seen: rank 0 was SIGKILLed on the host holding its checkpoint, and the warning quoted a copy
    to another host that had failed three launches before."""
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    store.add_event(10.0, "checkpoint", "j: copying the checkpoint left:/w/ck -> right:/w/ck failed: connection "
                    "refused; resuming from what right has", "j")
    store.add_event(11.0, "launch", "j generation 3: 1xT4 on right", "j")
    store.add_event(50.0, "launch", "j generation 4: 1xT4 on left", "j")
    store.add_event(99.0, "launch", "j generation 5: 1xT4 on left", "j")
    run = Run("j", Allocation.of("j", "T4", {"left": [0]}), 5, {}, 100.0, reports=1, start_samples=0.0)
    note_lost_progress(store, run, {"step": 20}, {"j": 400}, 101.0)
    warning = next(e.message for e in store.events("j") if e.kind == "warning")
    assert "could not be brought" not in warning and "That launch ended after its last checkpoint" in warning


def test_a_launch_far_ahead_of_its_last_one_says_it_loaded_another_jobs_checkpoint(tmp_path: Path) -> None:
    """Seen: a script saving to a relative path in a shared workdir stopped at step 70 and resumed
    at 560 from another job's file; 15,680 samples never trained counted as done, unsaid."""
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    run = Run("j", Allocation.of("j", "T4", {"right": [0]}), 3, {}, 100.0, reports=1, start_samples=0.0)
    note_lost_progress(store, run, {"step": 560}, {"j": 70}, 101.0)
    (warning,) = [e.message for e in store.events("j") if e.kind == "warning"]
    assert warning.startswith("j resumed ahead of where it was: generation 3 reports step 560, and its last launch "
                              "had reached step 70. It loaded a checkpoint that is not its own")
    ok = Store(tmp_path / "ok")
    ok.add_job(SPEC, 0.0)
    note_lost_progress(ok, run, {"step": 95}, {"j": 70}, 101.0)  # the stop's own checkpoint, a little on
    assert not [e for e in ok.events("j") if e.kind == "warning"]
    # a script whose first line came only when it was stopped, 3,194 steps on at 1,000 samples/s
    late = Store(tmp_path / "late")
    late.add_job(SPEC, 0.0)
    silent = Run("j", Allocation.of("j", "T4", {"right": [0]}), 4, {}, 100.0, reports=1, start_samples=0.0, spec=SPEC)
    note_lost_progress(late, silent, {"step": 4602, "samples_per_s": 1000.0}, {"j": 1408}, 210.0)
    assert not [e for e in late.events("j") if e.kind == "warning"], "it could have trained them since its launch"
    soon = Run("j", Allocation.of("j", "T4", {"right": [0]}), 3, {}, 100.0, reports=1, start_samples=0.0, spec=SPEC)
    note_lost_progress(late, soon, {"step": 560, "samples_per_s": 1000.0}, {"j": 70}, 101.0)
    assert [e for e in late.events("j") if e.kind == "warning"], "one second in, at 31 steps a second: not its own"


def test_a_launch_behind_its_last_one_says_that_launch_lost_its_host(tmp_path: Path) -> None:
    """The host of a job at step 80 of a checkpoint every 100 was lost; the warning blamed the
    script ("a crash, or a stop that saved none ..., or the script does not resume")."""
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    store.add_event(10.0, "launch", "j generation 1: 1xT4 on left", "j")
    store.add_event(50.0, "host-lost", "j: host left lost: unreachable: no heartbeat for 12 s", "j", "left")
    store.add_event(99.0, "launch", "j generation 2: 1xT4 on right", "j")
    run = Run("j", Allocation.of("j", "T4", {"right": [0]}), 2, {}, 100.0, reports=1, start_samples=0.0)
    note_lost_progress(store, run, {"step": 0}, {"j": 80}, 101.0)
    warning = next(e.message for e in store.events("j") if e.kind == "warning")
    assert ("That launch's host left lost: unreachable: no heartbeat for 12 s, after its last checkpoint (or "
            "before its first)") in warning, warning
    assert "DataLoader" not in warning


def test_a_launch_waits_a_while_for_the_host_with_its_checkpoint_before_starting_behind(tmp_path: Path) -> None:
    """Seen over SSH: the job was stopped on h1 for a move and h1 dropped out at that moment; the
    copy failed and the job was relaunched at once from what h2 had (step 10 for 1,971): 1,961
    steps trained again, and h1 was back 20 s later with the checkpoint."""
    import asyncio

    import pytest

    from heet_tui.cluster.loopback_sshd import free_port
    from heet_tui.cluster.options import ClusterOptions
    from heet_tui.control.checkpoint_hosts import COPY_WAIT_S, CopyWaiting

    store = Store(tmp_path / "state")
    spec = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10_000),
                   checkpoint_dir=str(tmp_path / "ck"))
    store.add_job(spec, 0.0)
    now = [0.0]
    hosts = CheckpointHosts(store, lambda: now[0])
    hosts.remember("j", "gone")
    gone = HostEntry("gone", "127.0.0.1", port=free_port("127.0.0.1"), shared_fs=False)  # nothing listens
    here = HostEntry("here", "localhost", transport="local", workdir=str(tmp_path / "w"), shared_fs=False)
    entries = {"gone": gone, "here": here}
    options = ClusterOptions(connect_timeout_s=3.0)

    def bring(reported: str | None) -> None:
        asyncio.run(hosts.bring("j", spec, entries, here, reported, None, options))

    with pytest.raises(CopyWaiting, match=r"a start within the next 60 s tries the copy again \(from gone once it "
                                          r"answers\), and one after that starts from what here has"):
        bring("/ck/last.pt")
    now[0] = COPY_WAIT_S / 2
    with pytest.raises(CopyWaiting, match="within the next 30 s"):
        bring("/ck/last.pt")
    assert not [e for e in store.events("j") if "resuming from what" in e.message]
    now[0] = COPY_WAIT_S + 1
    bring("/ck/last.pt")  # gone for good, it seems: what the new host has beats never starting
    assert [e for e in store.events("j") if "resuming from what here has" in e.message]
    now[0] = 100 * COPY_WAIT_S
    bring(None)  # a job that never reported a checkpoint has nothing to wait for

    # Seen: the host out, its wait begun; back, the job launched there (no copy needed); out again
    # two minutes later: the old failure counted, and the job started behind at once.
    now[0] = 200 * COPY_WAIT_S
    with pytest.raises(CopyWaiting, match="within the next 60 s"):
        bring("/ck/last.pt")
    now[0] += 10
    asyncio.run(hosts.bring("j", spec, entries, gone, "/ck/last.pt", None, options))  # back: launched on it
    now[0] += 2 * COPY_WAIT_S
    with pytest.raises(CopyWaiting, match="within the next 60 s"):
        bring("/ck/last.pt")

    # Seen with a hung host: its grace ran out, the plan said "starts without its checkpoint", and
    # the approved start still waited for the copy, failing two plans over 60 s.
    hosts.given_up.add("gone")
    now[0] += 1
    bring("/ck/last.pt")
    assert max(e.at for e in store.events("j") if "resuming from what here has" in e.message) == now[0]


def test_a_checkpoint_on_a_host_out_of_reach_that_no_ready_host_reads_is_said_away(tmp_path: Path) -> None:
    from heet_tui.core.host import HostState
    from heet_tui.core.snapshot import HostStatus

    store = Store(tmp_path / "state")
    for name in ("a", "b", "c"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    book = CheckpointHosts(store, lambda: 0.0)
    book.remember("a", "priv")
    book.remember("b", "shared")
    book.remember("c", "own-dir")
    entries = [HostEntry("priv", "10.0.0.3", shared_fs=False, workdir="/w"),
               HostEntry("shared", "10.0.0.4", workdir="/w"),  # the same directory on one filesystem
               HostEntry("own-dir", "10.0.0.5", workdir="/elsewhere"),  # shared_fs, but its own workdir
               HostEntry("new", "10.0.0.6", workdir="/w")]
    out = [HostStatus("priv", HostState.HOST_KEY_CHANGED, "x"), HostStatus("shared", HostState.UNREACHABLE, "y"),
           HostStatus("own-dir", HostState.UNREACHABLE, "z"), HostStatus("new", HostState.READY, "ok")]
    records = store.jobs()
    assert book.away(records, entries, out) == {"a": "priv (host-key-changed)", "c": "own-dir (unreachable)"}, \
        "b's checkpoint is read in place on new"
    assert book.away(records, entries, [HostStatus(h.name, HostState.READY, "ok") for h in entries]) == {}
    # its host gone from the hosts file (removed while no controller ran): a plan started it from step 0 unwarned
    assert book.away(records, entries[1:], [HostStatus(h.name, HostState.READY, "ok") for h in entries[1:]]) == \
        {"a": "priv (not in the hosts file)"}


def test_a_copy_the_new_host_refuses_is_never_given_up_on_into_a_start_from_nothing(
        tmp_path: Path, monkeypatch) -> None:
    """A copy refused by the new host's directory (another user's, or one others may write: the same
    refusal, and the one a test can make without root) was waited on as if the old
    host "may come back" (it was up), then the job started from what the new host had, and its
    checkpoint was recorded as being there (a retry then copied nothing and trained 3,901 steps again)."""
    import asyncio

    import pytest

    from heet_tui.control import checkpoint_hosts
    from heet_tui.control.checkpoint_hosts import COPY_WAIT_S, CopyWaiting

    store = Store(tmp_path / "state")
    spec = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10_000))
    store.add_job(spec, 0.0)
    now = [0.0]
    hosts = CheckpointHosts(store, lambda: now[0])
    hosts.remember("j", "old")
    old = HostEntry("old", "localhost", transport="local", shared_fs=False)
    new = HostEntry("new", "localhost", transport="local", shared_fs=False)
    mine, theirs = tmp_path / "ck", tmp_path / "theirs"
    mine.mkdir()
    (mine / "checkpoint.pt").write_bytes(b"weights")
    theirs.mkdir()
    theirs.chmod(0o777)  # where the new host keeps it: a directory anyone may write
    monkeypatch.setattr(checkpoint_hosts, "checkpoint_dir",
                        lambda job_id, spec, host, *args, **kwargs: str(theirs if host.name == "new" else mine))
    for at in (0.0, COPY_WAIT_S + 1, 10 * COPY_WAIT_S):
        now[0] = at
        with pytest.raises(CopyWaiting, match="may be written by others.*does not start on new without it"):
            asyncio.run(hosts.bring("j", spec, {"old": old, "new": new}, new, str(mine / "checkpoint.pt")))
    assert not [e for e in store.events("j") if "resuming from what" in e.message]
    assert hosts.left_behind() == {} and hosts._hosts() == {"j": "old"}
    assert list(theirs.iterdir()) == []


def test_a_host_is_given_up_on_when_lost_and_waited_for_again_once_back(tmp_path: Path) -> None:
    from control_lab import manual_controller, run_and_clean, write_local_hosts

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.host_loss import on_host_changed

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))

    async def scenario() -> None:
        async with manual_controller(hosts, Store(tmp_path / "state")) as ctl:
            assert await ctl.cluster.wait_settled(timeout=30)
            assert "h" not in ctl.executor.checkpoints.given_up
            ctl.executor.lose_host("h", "connection lost")
            assert "h" in ctl.executor.checkpoints.given_up
            on_host_changed(ctl, "h", ctl.cluster.host_status("h"))  # ready
            assert "h" not in ctl.executor.checkpoints.given_up

    run_and_clean(scenario, tmp_path)


def test_after_a_copy_the_jobs_checkpoint_path_is_the_one_on_its_new_host(tmp_path: Path) -> None:
    """After a move a -> b, `jobs --json` said checkpoint /.../a/work/checkpoints/... with
    checkpoint_host b: a path that does not exist on b, until the job saved again."""
    import asyncio

    from heet_tui.cluster.options import ClusterOptions
    from heet_tui.control.launch import checkpoint_dir

    store = Store(tmp_path / "state")
    spec = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10_000))
    store.add_job(spec, 0.0)
    old, new = (HostEntry(n, "localhost", transport="local", workdir=str(tmp_path / n), shared_fs=False)
                for n in ("a", "b"))
    src = Path(checkpoint_dir("j", spec, old, store.store_id))
    src.mkdir(parents=True)
    (src / "checkpoint.pt").write_bytes(b"weights")
    reported = str(src / "checkpoint.pt")
    store.update_progress("j", 40, 1280.0, reported)
    hosts = CheckpointHosts(store, lambda: 0.0)
    hosts.remember("j", "a")
    asyncio.run(hosts.bring("j", spec, {"a": old, "b": new}, new, reported, None, ClusterOptions()))
    moved = Path(checkpoint_dir("j", spec, new, store.store_id)) / "checkpoint.pt"
    assert moved.read_bytes() == b"weights"
    assert store.job("j").checkpoint == str(moved) and store.job("j").job.steps_done == 40


def test_a_checkpoint_the_new_hosts_disk_has_no_room_for_is_not_started_without(tmp_path: Path, monkeypatch) -> None:
    """A full disk on the new host failed the copy with SFTP's bare "Failure", after 60 s the job
    started there "from what it has", and trained from step 0 while its checkpoint sat whole on a
    host that never left. The room is looked at first, and said with both figures."""
    import asyncio
    import os

    import pytest

    from heet_tui.control import checkpoint_hosts
    from heet_tui.control.checkpoint_hosts import COPY_WAIT_S, CopyWaiting

    store = Store(tmp_path / "state")
    store.add_job(SPEC, 0.0)
    now = [0.0]
    hosts = CheckpointHosts(store, lambda: now[0])
    hosts.remember("j", "old")
    old = HostEntry("old", "localhost", transport="local", shared_fs=False)
    new = HostEntry("new", "localhost", transport="local", shared_fs=False)
    mine, there = tmp_path / "ck", tmp_path / "there"
    mine.mkdir()
    (mine / "checkpoint.json").write_text('{"step": 15072}')
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    with open(mine / "checkpoint.pt", "wb") as fh:  # sparse: more than the disk holds, taking none of it
        fh.truncate(free + (1 << 30))
    monkeypatch.setattr(checkpoint_hosts, "checkpoint_dir",
                        lambda job_id, spec, host, *args, **kwargs: str(there if host.name == "new" else mine))
    for at in (0.0, COPY_WAIT_S + 1, 10 * COPY_WAIT_S):
        now[0] = at
        with pytest.raises(CopyWaiting, match=r"new has [\d,]+ MB free there and the checkpoint needs [\d,]+ MB.*"
                                              "does not start on new without it"):
            asyncio.run(hosts.bring("j", SPEC, {"old": old, "new": new}, new, str(mine / "checkpoint.pt")))
    assert not [e for e in store.events("j") if "resuming from what" in e.message]
    assert hosts.left_behind() == {} and hosts._hosts() == {"j": "old"}
    assert list(there.iterdir()) == [], "not even the small checkpoint.json, which claimed the step"
