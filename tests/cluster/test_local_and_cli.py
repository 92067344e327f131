"""The local transport, jobs that end while no agent runs, a hung agent, and the hosts check CLI
(its trust commands: test_hosts_trust_cli.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import FAST, make_cluster, wait_until

from heet_tui.cli.hosts_check import CHECK_OPTIONS, check_hosts, format_table, run_check, run_trust
from heet_tui.cluster import JobExited, JobsReported
from heet_tui.config.hosts_file import load_hosts
from heet_tui.core.host import HostState

DATA = Path(__file__).parent / "data"


def _local_hosts(tmp_path, **extra):
    workdir = tmp_path / "local-work"
    text = (f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
            f'workdir = "{workdir}"\nemulate = {{ gpu_type = "T4", count = 2, speed = 0.5 }}\n')
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return path, workdir


def test_job_that_ends_while_no_agent_runs_is_reported_with_its_exit_code(tmp_path):
    path, workdir = _local_hosts(tmp_path)

    async def first_session():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            assert cluster.host_status("here").gpu_source == "emulated"
            return await cluster.launch("here", "short", 3, ["sh", "-c", "sleep 1; echo done; exit 5"])
        finally:
            await cluster.stop()  # the agent sees EOF and exits; the job keeps running

    async def second_session():
        cluster = make_cluster(path)
        seen = []
        events = cluster.events()  # subscribed before start: sees the very first report

        async def collect():
            async for event in events:
                seen.append(event)

        collector = asyncio.ensure_future(collect())
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            await wait_until(lambda: any(isinstance(e, JobExited) for e in seen), timeout=5)
            return seen
        finally:
            collector.cancel()
            await cluster.stop()

    job = asyncio.run(first_session())
    assert _alive(job.pid)  # survived the agent's exit
    assert asyncio.run(wait_for_exit(job.pid, 10))
    seen = asyncio.run(second_session())
    reported = next(e for e in seen if isinstance(e, JobsReported))
    assert [(j.job_id, j.generation, j.state, j.exit_code) for j in reported.jobs] == [("short", 3, "exited", 5)]
    exits = [e for e in seen if isinstance(e, JobExited)]
    assert [e.job.exit_code for e in exits] == [5]
    # The agent reports the exit before its hello reply; published then, a controller acted on
    # it (stopping the job's other ranks) while requests to the host still failed, and counted
    # live ranks lost. Job events now follow the report that makes the host ready.
    assert seen.index(reported) < seen.index(exits[0])
    assert "done" in (workdir / "hosts" / "here" / "logs" / "short-g3.log").read_text()


def test_hung_agent_is_detected_by_heartbeat_timeout_and_replaced(tmp_path):
    path, workdir = _local_hosts(tmp_path)

    async def scenario():
        cluster = make_cluster(path, replace(FAST, heartbeat_s=0.25, heartbeat_timeout_s=1.5))
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            old = int((workdir / "hosts" / "here" / "agent.pid").read_text())
            os.kill(old, signal.SIGSTOP)
            try:
                lost = await cluster.wait_for_state("here", HostState.UNREACHABLE, 8)
                message = cluster.host_status("here").message
                back = await cluster.wait_for_state("here", HostState.READY, 20)
            finally:
                os.kill(old, signal.SIGCONT) if _alive(old) else None
            new = int((workdir / "hosts" / "here" / "agent.pid").read_text())
            return lost, message, back, old, new
        finally:
            await cluster.stop()

    lost, message, back, old, new = asyncio.run(scenario())
    assert lost and "no heartbeat" in message
    assert back and new != old


def test_hosts_check_beside_a_running_controller_leaves_its_agent_and_jobs_alone(tmp_path):
    # Seen in tmux: `heet-tui hosts check` while the TUI ran replaced the controller's agents,
    # so every host was "lost" and every running job restarted from its checkpoint.
    path, workdir = _local_hosts(tmp_path)
    pid_file = workdir / "hosts" / "here" / "agent.pid"

    async def scenario():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            agent = pid_file.read_text()
            job = await cluster.launch("here", "long", 1, ["sleep", "30"])
            (row,) = await check_hosts(load_hosts(path))
            await asyncio.sleep(0.5)  # a replaced agent would be gone by now
            assert pid_file.read_text() == agent and _alive(int(agent))
            assert cluster.host_status("here").state is HostState.READY
            stopped = await cluster.stop_job("here", "long", generation=1, grace_s=1.0)
            assert stopped.state == "exited", "the controller still reaches its job through its own agent"
            return row, job
        finally:
            await cluster.stop()

    row, job = asyncio.run(scenario())
    assert row["state"] == "ready" and row["gpu_source"] == "emulated"
    assert asyncio.run(wait_for_exit(job.pid, 10))


def test_hosts_check_warns_of_a_host_another_state_stores_controller_manages(tmp_path):
    """It said "ready"; the user's controller was then refused there (another user's agent held
    the same workdir)."""
    path, _ = _local_hosts(tmp_path)

    async def scenario():
        cluster = make_cluster(path, replace(FAST, owner="store-a"))
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            (theirs,) = await check_hosts(load_hosts(path), replace(CHECK_OPTIONS, owner="store-b"))
            (own,) = await check_hosts(load_hosts(path), replace(CHECK_OPTIONS, owner="store-a"))
            return theirs, own
        finally:
            await cluster.stop()

    theirs, own = asyncio.run(scenario())
    assert theirs["state"] == "ready" and any(
        "another state store's heet-tui controller manages this host" in w and "store-a" in w
        for w in theirs["warnings"]), theirs["warnings"]
    assert not any("manages this host" in w for w in own["warnings"]), own["warnings"]
    assert "manages this host" in format_table([theirs]), "the table shows a ready host's warnings"


def test_hosts_check_json_and_trust(lab, capsys):
    good, newcomer = lab.add_host("good"), lab.add_host("newcomer", trusted=False)
    hosts = load_hosts(lab.hosts_toml([
        lab.entry_for(good, emulate={"gpu_type": "A100", "count": 2, "speed": 1.0}),
        lab.entry_for(newcomer, workdir="~/.heet"),  # the default: deployed under the host's $HOME
    ], python=sys.executable))  # one with torch: a python without it is warned of (the test below)
    assert run_check(hosts, as_json=True) == 1
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows["good"]) == {"name", "state", "message", "gpu_source", "gpus", "agent_version", "rtt_ms",
                                 "warnings"}
    assert rows["good"]["warnings"] == []
    assert rows["good"]["state"] == "ready" and rows["good"]["gpu_source"] == "emulated"
    assert rows["good"]["gpus"] == [{"index": 0, "type": "A100", "memory_mb": 0},
                                    {"index": 1, "type": "A100", "memory_mb": 0}]
    assert rows["good"]["agent_version"] and rows["good"]["rtt_ms"] > 0
    from heet_tui.cluster.agent_bundle import agent_bundle

    assert rows["good"]["agent_version"].endswith(f"+{agent_bundle().digest[:8]}"), "which build's agent it is"
    assert rows["newcomer"]["state"] == "host-key-unknown" and "SHA256:" in rows["newcomer"]["message"]

    assert run_trust(hosts, "newcomer", assume_yes=True) == 0
    out = capsys.readouterr().out
    assert "SHA256:" in out and str(lab.known_hosts) in out
    assert run_trust(hosts, "newcomer", assume_yes=True) == 0
    assert "already trusted" in capsys.readouterr().out

    # ready, but newcomer declares no GPUs and has none to read: a host that can run nothing fails the check
    assert run_check(hosts, as_json=False) == 1
    table = capsys.readouterr().out
    assert "newcomer" in table and "2xA100" in table and "ready with no usable GPU: newcomer" in table
    assert list((newcomer.home / ".heet").glob("heet-agent-*.pyz"))


def test_hosts_check_warns_when_declared_emulation_leaves_real_gpus_unused(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\ncat {DATA / 'nvidia-smi-a100.csv'}\n")  # two A100s answer
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    path, _workdir = _local_hosts(tmp_path)
    assert run_check(load_hosts(path), as_json=True) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["gpu_source"] == "emulated" and [g["type"] for g in row["gpus"]] == ["T4", "T4"]
    (warning,) = row["warnings"]
    assert "real GPU(s)" in warning and warning.endswith("not used: this host declares emulated GPUs")
    assert warning in row["message"]
    assert run_check(load_hosts(path), as_json=False) == 0
    assert "not used: this host declares emulated GPUs" in capsys.readouterr().out


def test_a_host_without_usable_gpus_says_why(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate "
                                     "with the NVIDIA driver.' >&2\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "bare"\ntransport = "local"\npython = "{sys.executable}"\n'
                    f'workdir = "{tmp_path / "w"}"\n')
    (row,) = asyncio.run(check_hosts(load_hosts(path), replace(CHECK_OPTIONS, probes=("nvidia-smi",))))
    assert row["state"] == "ready" and row["gpus"] == []
    (warning,) = row["warnings"]
    assert warning.startswith("no usable GPUs: nvidia-smi:") and "could not communicate" in warning
    assert "emulate = {...}" in warning and warning in row["message"]


async def wait_for_exit(pid: int, timeout: float) -> bool:
    return await wait_until(lambda: not _alive(pid), timeout=timeout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_two_entries_sharing_a_machine_and_workdir_do_not_fight(tmp_path):
    """Like the bundled local config: two emulated hosts on one machine, one workdir."""
    workdir = tmp_path / "shared-work"
    path = tmp_path / "hosts.toml"
    path.write_text(f'[defaults]\nworkdir = "{workdir}"\npython = "{sys.executable}"\n' + "".join(
        f'[[hosts]]\nname = "{name}"\ntransport = "local"\nemulate = {{ gpu_type = "{kind}", count = 1, speed = 1.0 }}\n'
        for name, kind in (("local-a100", "A100"), ("local-t4", "T4"))))

    async def scenario():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=20)
            await asyncio.sleep(1.0)  # a fight over one lock would show up as reconnects by now
            return {s.name: (s.state, s.gpu_type) for s in cluster.status()}
        finally:
            await cluster.stop()

    status = asyncio.run(scenario())
    assert status == {"local-a100": (HostState.READY, "A100"), "local-t4": (HostState.READY, "T4")}
    (agent,) = workdir.glob("heet-agent-*.pyz")
    assert agent.stat().st_mode & 0o777 == 0o600, "private, as an SSH host's"
    pids = {(workdir / "hosts" / name / "agent.pid").read_text() for name in ("local-a100", "local-t4")}
    assert len(pids) == 2
    for name in ("local-a100", "local-t4"):  # one agent start each: nobody took the other's place
        assert (workdir / "hosts" / name / "agent.log").read_text().count("starting") == 1


def test_hosts_added_and_removed_while_running(tmp_path):
    path, _workdir = _local_hosts(tmp_path)
    extra = replace(load_hosts(path).hosts[0], name="late", emulate=None)

    async def scenario():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            await cluster.add_host(extra)
            ready = await cluster.wait_for_state("late", HostState.READY, 20)
            names_before = [s.name for s in cluster.status()]
            await cluster.remove_host("here")
            return ready, names_before, [s.name for s in cluster.status()], cluster.host_status("late").gpu_source
        finally:
            await cluster.stop()

    ready, before, after, source = asyncio.run(scenario())
    assert ready and before == ["here", "late"] and after == ["late"]
    assert source == "none"  # no emulation declared (and the tests switch GPU probes off)


def test_a_local_host_comes_up_under_a_umask_of_000_with_its_agent_private(tmp_path):
    """Its workdir was made 0777, then refused as not the user's alone (the host never came up);
    the agent's unpacked sources were 0777/0666 until the workdir was made private."""
    path, workdir = _local_hosts(tmp_path)
    assert _checked_under_umask_000(path)["state"] == "ready"
    assert oct(workdir.stat().st_mode & 0o777) == "0o700"
    unpacked = next(workdir.glob("heet-agent-*.d"))
    assert oct(unpacked.stat().st_mode & 0o777) == "0o700"
    assert oct((unpacked / "heet_agent" / "main.py").stat().st_mode & 0o777) == "0o600"
    # and the directories above it it had to make: 0777 under that umask, then refused as open to all
    deeper = tmp_path / "new" / "er"
    path.write_text(path.read_text().replace(f'workdir = "{workdir}"', f'workdir = "{deeper / "wd"}"'))
    assert _checked_under_umask_000(path)["state"] == "ready"
    assert oct((tmp_path / "new").stat().st_mode & 0o777) == "0o700"


def _checked_under_umask_000(path):
    old = os.umask(0)
    try:
        (row,) = asyncio.run(check_hosts(load_hosts(path)))
    finally:
        os.umask(old)
    return row


def test_one_gpu_type_emulated_at_two_speeds_is_a_warning_of_both_hosts(tmp_path):
    """Plans know GPUs by type: one job went across a host at 1.0 and one at 0.25, running at the
    slow one's pace, and nothing said the hosts file asked for it."""
    text = "".join(f'[[hosts]]\nname = "{name}"\ntransport = "local"\npython = "{sys.executable}"\n'
                   f'workdir = "{tmp_path / name}"\nemulate = {{ gpu_type = "A100", count = 1, speed = {speed} }}\n'
                   for name, speed in (("fast", 1.0), ("slow", 0.25)))
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    rows = {r["name"]: r for r in asyncio.run(check_hosts(load_hosts(path)))}
    assert rows["slow"]["state"] == "ready"
    assert any("emulated A100 at speed 0.25, which other hosts emulate at 1: plans know GPUs by type" in w
               and "emulate's gpu_type = \"A100-x0.25\"" in w and "Emulate field: A100-x0.25:1:0.25" in w
               and "add it to the gpu_types of jobs that list A100" in w  # they left the renamed host alone
               for w in rows["slow"]["warnings"]), rows["slow"]["warnings"]
    # the fast host keeps its type: told "-slow" too, both hosts followed it into the same clash
    assert any("emulated A100 at speed 1, which other hosts emulate at 0.25" in w and "this one may keep A100" in w
               and "gpu_type =" not in w for w in rows["fast"]["warnings"]), rows["fast"]["warnings"]
    # the advice can be followed: the new type beside an emulate of A100 was refused
    path.write_text(text.replace('"A100", count = 1, speed = 0.25', '"A100-x0.25", count = 1, speed = 0.25'))
    followed = load_hosts(path)
    assert followed.speed_clash("slow") is None and followed.speed_clash("fast") is None


def test_the_clash_note_goes_once_the_other_host_leaves_the_file(tmp_path):
    """Noted when the GPUs were read, the clash stayed on the fast host for good after the slow
    one was removed from the file."""
    text = "".join(f'[[hosts]]\nname = "{name}"\ntransport = "local"\npython = "{sys.executable}"\n'
                   f'workdir = "{tmp_path / name}"\nemulate = {{ gpu_type = "A100", count = 1, speed = {speed} }}\n'
                   for name, speed in (("fast", 1.0), ("slow", 0.25)))
    path = tmp_path / "hosts.toml"
    path.write_text(text)

    async def scenario():
        cluster = make_cluster(path)
        async with cluster:
            assert await wait_until(lambda: cluster.host_status("fast").state is HostState.READY)
            assert any("which other hosts emulate at 0.25" in w for w in cluster.host_status("fast").warnings)
            path.write_text(text.split("[[hosts]]")[0] + "[[hosts]]" + text.split("[[hosts]]")[1])
            cluster.hosts_file = load_hosts(path)  # as a reload of the edited file sets it
            assert not any("other hosts emulate" in w for w in cluster.host_status("fast").warnings)
            assert not any("other hosts emulate" in w for w in cluster.warnings("fast"))
            # the detail the TUI shows is the host's message: it kept the note for good
            assert "other hosts emulate" not in cluster.host_status("fast").message

    asyncio.run(scenario())


def test_a_local_hosts_workdir_under_a_directory_others_may_write_is_refused(tmp_path):
    """As an ssh host's: only the workdir itself was checked."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "l"\ntransport = "local"\npython = "{sys.executable}"\n'
                    f'workdir = "{open_dir / "heet"}"\nemulate = {{ gpu_type = "T4", count = 1 }}\n')
    (row,) = asyncio.run(check_hosts(load_hosts(path)))
    assert row["state"] == "agent-error" and f"{open_dir} above it may be written by every user" in row["message"], row
    assert not list((open_dir / "heet").glob("heet-agent-*")), "no agent written there"


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's link needs root")
def test_a_local_hosts_workdir_that_is_someone_elses_link_is_refused(tmp_path):
    """Only an ssh host's was: a link planted in /tmp led the agent into the user's directory,
    and could be pointed at the planter's own afterwards."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    shared = tmp_path / "tmpshared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "heetwd"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "l"\ntransport = "local"\npython = "{sys.executable}"\n'
                    f'workdir = "{link}"\nemulate = {{ gpu_type = "T4", count = 1 }}\n')
    (row,) = asyncio.run(check_hosts(load_hosts(path)))
    assert row["state"] == "agent-error" and f"{link} on the way to it is a link" in row["message"], row
    assert list(victim.iterdir()) == [] and oct(victim.stat().st_mode & 0o777) == "0o755"
    # above the workdir too: the agent ran through it, and once the link was pointed at the planter's
    # tree, the agent file there ran as the user, with the jobs' secrets
    path.write_text(path.read_text().replace(f'workdir = "{link}"', f'workdir = "{link}/scratch/heet"'))
    (row,) = asyncio.run(check_hosts(load_hosts(path)))
    assert row["state"] == "agent-error" and f"{link} on the way to it is a link" in row["message"], row
    assert list(victim.iterdir()) == [], "nothing made through it"


