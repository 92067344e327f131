"""Checkpoint directories as the agent prepares them at launch (remote/checkpoint_dirs.py): whose
they are, who may write them, scratch ones for profiling runs, and their absolute paths."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from agent_process import AgentProcess


def test_a_checkpoint_dir_used_by_another_state_store_is_refused(agent, tmp_path):
    # Training resumes from whatever its checkpoint directory holds: a job of another store
    # (another user naming the same shared directory, or a fresh state directory) must not.
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    ckpt = tmp_path / "shared" / "ckpt"

    def launch(job_id, owner):
        env = {"HEET_CHECKPOINT_DIR": str(ckpt), "HEET_CHECKPOINT_OWNER": owner}
        return agent.request("launch", job_id=job_id, generation=1, argv=["true"], env=env)

    assert launch("first", "store-a")["ok"]
    assert (ckpt / ".heet-owner").read_text() == "store-a\n"
    assert oct((ckpt / ".heet-owner").stat().st_mode & 0o777) == "0o600"
    refused = launch("other", "store-b")
    assert not refused["ok"] and f"checkpoint dir {ckpt} holds another heet-tui state store's" in refused["error"]
    assert launch("again", "store-a")["ok"]  # the same store's next job (or generation) goes ahead
    assert (ckpt / ".heet-owner").read_text() == "store-a\n"
    # one others may write: they could swap the checkpoints it resumes from, or plant links
    shared = tmp_path / "world" / "ckpt"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    env = {"HEET_CHECKPOINT_DIR": str(shared), "HEET_CHECKPOINT_OWNER": "store-a"}
    refused = agent.request("launch", job_id="open", generation=1, argv=["true"], env=env)
    assert not refused["ok"] and f"checkpoint dir {shared} may be written by others (mode 0o777)" in refused["error"]
    assert not (shared / ".heet-owner").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="making a link another user owns takes root")
def test_a_checkpoint_dir_through_another_users_link_or_an_open_directory_is_refused(agent, request):
    """A link another user planted in a shared sticky directory was followed (and swapped while the
    job ran: the stop's checkpoint went into their directory); a non-sticky directory anyone may
    write, above the checkpoint dir, lets anyone swap it."""
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    # under a directory others may pass: inside the agent's private workdir nobody else could plant
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    base.chmod(0o755)
    shared, mine = base / "shared", base / "mine"
    shared.mkdir()
    shared.chmod(0o1777)
    mine.mkdir(mode=0o700)

    def launch(job_id, directory):
        env = {"HEET_CHECKPOINT_DIR": str(directory), "HEET_CHECKPOINT_OWNER": "store-a"}
        return agent.request("launch", job_id=job_id, generation=1, argv=["true"], env=env)

    (shared / "ck").symlink_to(mine)
    os.lchown(shared / "ck", 1234, 1234)
    refused = launch("planted", shared / "ck")
    assert not refused["ok"] and f"{shared / 'ck'} is a link that uid 1234 made, not you" in refused["error"], refused
    assert not (mine / ".heet-owner").exists()
    os.lchown(shared / "ck", 0, 0)  # the user's own link (root's, here) is theirs to make
    assert launch("own-link", shared / "ck")["ok"] and (mine / ".heet-owner").exists()
    opened = base / "open"
    opened.mkdir()
    opened.chmod(0o777)
    refused = launch("open", opened / "ck")
    assert not refused["ok"] and f"{opened} above it may be written by anyone and is not sticky" in refused["error"]
    assert not (opened / "ck").exists()
    assert launch("sticky", shared / "mine-too" / "ck")["ok"], "a sticky /tmp-like directory is fine"


def test_a_scratch_checkpoint_dir_is_the_runs_own_and_goes_when_it_ends(agent, tmp_path):
    # Profiling runs checkpoint into a scratch dir: made for the run, removed when it exits,
    # and never one that existed before (the agent removes only what it made).
    agent.line()
    agent.request("hello", protocol=1, probes=[])
    scratch = tmp_path / "profiling" / "j.p1-store"
    env = {"HEET_CHECKPOINT_DIR": str(scratch), "HEET_CHECKPOINT_SCRATCH": "1"}
    write = f"open({str(scratch / 'checkpoint.pt')!r}, 'w').write('x')"
    assert agent.request("launch", job_id="j.p1", generation=1, argv=[sys.executable, "-c", write], env=env)["ok"]
    ended = agent.events_until("job_exit")
    assert ended["exit_code"] == 0, "the run could write into its scratch dir"
    assert not scratch.exists()

    kept = tmp_path / "ckpt"
    kept.mkdir()
    (kept / "checkpoint.pt").write_text("a real job's")
    refused = agent.request("launch", job_id="j.p2", generation=2, argv=["true"],
                            env={"HEET_CHECKPOINT_DIR": str(kept), "HEET_CHECKPOINT_SCRATCH": "1"})
    assert not refused["ok"] and "exists already" in refused["error"]
    assert (kept / "checkpoint.pt").read_text() == "a real job's"


def test_a_job_gets_its_checkpoint_dir_absolute_with_the_home_dir_expanded(tmp_path):
    # The controller names it as the hosts file does ("~/.heet/checkpoints/..."): a script that
    # does not use heet_agent.elastic opened "~/..." literally and failed, or made a dir named "~"
    home, workdir = tmp_path / "home", tmp_path / "jobs"
    home.mkdir()
    workdir.mkdir()
    agent = AgentProcess(tmp_path / "agent", env=os.environ | {"HOME": str(home)})
    try:
        agent.line()
        agent.request("hello", protocol=1, probes=[])
        script = ("import os; d = os.environ['HEET_CHECKPOINT_DIR']; "
                  "open(os.path.join(d, 'ckpt.txt'), 'w').write(d)")
        for n, given in enumerate(("~/.heet/checkpoints/j.store", "ckpt/rel")):
            env = {"HEET_CHECKPOINT_DIR": given, "HEET_CHECKPOINT_OWNER": "store"}
            assert agent.request("launch", job_id=f"j{n}", generation=1, argv=[sys.executable, "-c", script],
                                 env=env, workdir=str(workdir))["ok"]
            assert agent.events_until("job_exit")["exit_code"] == 0
        assert (home / ".heet/checkpoints/j.store/ckpt.txt").read_text() == str(home / ".heet/checkpoints/j.store")
        assert (workdir / "ckpt/rel/ckpt.txt").read_text() == str(workdir / "ckpt/rel")
        assert not (workdir / "~").exists()
    finally:
        agent.proc.kill()
        agent.proc.wait()


def test_under_umask_000_the_agents_own_directories_are_private_and_launches_go_ahead(tmp_path):
    """Under umask 000 the directories made above a job's checkpoint dir were 0777, which the launch
    then refused as open to anyone: every job failed, and went on failing once the umask was fixed."""
    umask = os.umask(0)
    try:
        agent = AgentProcess(tmp_path)
    finally:
        os.umask(umask)
    try:
        agent.line()
        agent.request("hello", protocol=1, probes=[])
        ckpt = tmp_path / "checkpoints" / "cnn.03aeb05f"
        env = {"HEET_CHECKPOINT_DIR": str(ckpt), "HEET_CHECKPOINT_OWNER": "store-a"}
        launched = agent.request("launch", job_id="cnn", generation=1, argv=["true"], env=env)
        assert launched["ok"], launched
        host_dir = tmp_path / "hosts" / "h1"
        for made in (tmp_path / "checkpoints", ckpt, tmp_path / "hosts", host_dir / "logs", host_dir / "exits"):
            assert oct(made.stat().st_mode & 0o777) == "0o700", made
        # one an older agent left open, inside the private workdir: nobody else can reach it
        (tmp_path / "checkpoints").chmod(0o777)
        env["HEET_CHECKPOINT_DIR"] = str(tmp_path / "checkpoints" / "next.1")
        launched = agent.request("launch", job_id="next", generation=1, argv=["true"], env=env)
        assert launched["ok"], launched
    finally:
        agent.proc.kill()
        agent.proc.wait()
