"""Remote command lines are quoted: hostile hosts-file values stay literal in a real shell."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from heet_tui.cluster.login_output import SHELL_READY, after_login
from heet_tui.cluster.remote_command import (
    NEED_AGENT,
    UnsafeValue,
    check_python,
    check_workdir,
    in_sh,
    start_agent,
    upload_with_cat,
)

NAME = "heet-agent-0123456789abcdef.pyz"


def test_hostile_workdir_stays_literal(tmp_path):
    workdir = str(tmp_path / "it's $(touch PWNED) `touch PWNED2`; dir")
    out = subprocess.run(["sh", "-c", start_agent("python3", workdir, NAME, "h1")], cwd=tmp_path,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True).stdout
    assert out.strip() == NEED_AGENT
    assert (tmp_path / "it's $(touch PWNED) `touch PWNED2`; dir").is_dir()
    assert not list(tmp_path.rglob("PWNED*"))


def test_waiting_shell_looks_again_for_each_line_then_runs_the_agent(tmp_path):
    """The first start prints need_agent and waits on the same channel; after the deploy one line
    makes it look again, and the rest of stdin belongs to the agent it execs."""
    workdir = tmp_path / "w"
    proc = subprocess.Popen(["sh", "-c", start_agent(sys.executable, str(workdir), NAME, "h1")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == NEED_AGENT
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == NEED_AGENT  # still missing: it says so again
    (workdir / NAME).write_text("import sys\nprint('agent', sys.argv[1:], sys.stdin.read().strip())\n")
    out, _ = proc.communicate("\nrest of stdin\n", timeout=30)
    assert out.strip() == "agent ['--workdir', '.', '--host', 'h1'] rest of stdin"


@pytest.mark.parametrize("mode", [0o775, 0o777])
def test_a_workdir_others_may_write_is_refused_before_anything_runs_from_it(tmp_path, mode):
    """The agent file's name is a hash of the public bundle: a file planted in a shared workdir
    (/tmp/heet, a group project dir) ran as the user who connected."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / NAME).write_text("open('PLANTED_RAN', 'w').close()\n")
    shared.chmod(mode)
    done = subprocess.run(["sh", "-c", start_agent(sys.executable, str(shared), NAME, "h1")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert done.returncode == 3 and not (shared / "PLANTED_RAN").exists()
    assert f"heet-tui: workdir {shared} is not yours alone" in done.stderr
    shared.chmod(0o755)
    ran = subprocess.run(["sh", "-c", start_agent(sys.executable, str(shared), NAME, "h1")],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert ran.returncode == 0 and (shared / "PLANTED_RAN").exists(), "only others' write access is refused"


def test_unpacked_agent_is_preferred_to_the_zip(tmp_path):
    (tmp_path / NAME).write_text("print('zip')\n")
    unpacked = tmp_path / NAME.replace(".pyz", ".d")
    unpacked.mkdir()
    (unpacked / "__main__.py").write_text("print('unpacked')\n")
    out = subprocess.run(["sh", "-c", start_agent(sys.executable, str(tmp_path), NAME, "h1")],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "unpacked"


def test_tilde_workdir_expands_to_home_and_upload_is_atomic(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(["sh", "-c", upload_with_cat("~/.heet dir", NAME)], input=b"payload", env=env, check=True)
    assert (home / ".heet dir" / NAME).read_bytes() == b"payload"
    assert not list((home / ".heet dir").glob("*.tmp.*"))


def test_values_that_cannot_be_commands_are_refused():
    with pytest.raises(UnsafeValue, match='host "h": python'):
        check_python("h", "python3; reboot")
    with pytest.raises(UnsafeValue):
        check_python("h", "-c")
    with pytest.raises(UnsafeValue):
        check_workdir("h", "work\ndir")
    for fish_or_tcsh in ("a\\'$(touch PWNED)\" #", "ends\\", "run!1"):  # fish reads \' in quotes; tcsh expands !
        with pytest.raises(UnsafeValue, match="no backslash, !"):
            check_workdir("h", fish_or_tcsh)
    with pytest.raises(UnsafeValue):
        start_agent("python3", "/w", "../../evil.pyz", "h")


@pytest.mark.parametrize("shell", ["sh", "bash", "tcsh", "fish"])
def test_the_commands_run_whatever_the_login_shell(tmp_path, shell):
    """sshd hands the command to the user's login shell: tcsh (common on older HPC sites) said
    "Badly placed ()'s" to the POSIX start command, fish refused it too. `.ci/run` installs both
    (conftest.py stops the suite without them)."""
    path = shutil.which(shell)
    workdir = "~/w dir/it's $(touch PWNED)"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    start = in_sh(after_login(start_agent("python3", workdir, NAME, "h1")))
    out = subprocess.run([path, "-c", start], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=30).stdout
    assert out.split() == [SHELL_READY, NEED_AGENT]
    subprocess.run([path, "-c", in_sh(upload_with_cat(workdir, NAME))], env=env, input="payload", text=True,
                   check=True, timeout=30)
    assert (tmp_path / "w dir" / "it's $(touch PWNED)" / NAME).read_text() == "payload"
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.skipif(os.getuid() != 0, reason="planting another user's link needs root")
def test_a_workdir_that_is_someone_elses_link_is_refused_and_its_target_left_alone(tmp_path):
    """A link planted in a shared directory led to a directory of the user's: it passed the
    ownership test (of the target), and the agent made it 0700 and filled it with its files."""
    victim = tmp_path / "project"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    shared = tmp_path / "tmpshared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "heet-me"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    done = subprocess.run(["sh", "-c", start_agent(sys.executable, str(link), NAME, "h1")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert done.returncode == 3 and "is a link someone else made" in done.stderr, done.stderr
    assert list(victim.iterdir()) == [] and stat.S_IMODE(victim.stat().st_mode) == 0o755
    os.lchown(link, os.getuid(), os.getgid())  # the user's own link is theirs to use
    (victim / NAME).write_text("print('ran')\n")
    ran = subprocess.run(["sh", "-c", start_agent(sys.executable, str(link) + "/", NAME, "h1")],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == "ran", ran.stderr


def test_a_workdir_under_a_directory_others_may_write_is_refused(tmp_path):
    """Only the workdir itself was checked: under a directory anyone may write (no sticky bit),
    another user could rename it away and put theirs, with an agent file, in its place."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    workdir = open_dir / "heet"
    done = subprocess.run(["sh", "-c", start_agent(sys.executable, str(workdir), NAME, "h1")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert done.returncode == 3 and f"{open_dir} above it belongs to another user, or others (or a group not your " \
        "own) may write it" in done.stderr, done.stderr
    open_dir.chmod(0o1777)  # sticky, as /tmp: others cannot rename what is not theirs
    ok = subprocess.run(["sh", "-c", start_agent(sys.executable, str(workdir), NAME, "h1")],
                        stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == NEED_AGENT, ok.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="a directory of another user needs root")
def test_a_workdir_reached_through_another_users_directory_is_refused(tmp_path):
    """A link of another user's on the way (evlink -> their directory) passed: the agent made its
    workdir, and unpacked itself, in a directory they own and can empty or replace."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    link = tmp_path / "evlink"
    link.symlink_to(theirs)
    os.lchown(link, 65534, 65534)
    done = subprocess.run(["sh", "-c", start_agent(sys.executable, str(link / "heet"), NAME, "h1")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert done.returncode == 3 and f"{theirs} above it belongs to another user" in done.stderr, done.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="a group the user is not in needs root")
def test_a_workdir_under_a_directory_another_group_may_write_is_refused(tmp_path):
    """A parent writable by a group the user is not in (root:labx 2775) passed, and a member of
    labx swapped the workdir for one with their agent file: it ran as the user."""
    group_dir = tmp_path / "gshared"
    group_dir.mkdir()
    os.chown(group_dir, 0, 65534)
    group_dir.chmod(0o2775)
    done = subprocess.run(["sh", "-c", start_agent(sys.executable, str(group_dir / "heet"), NAME, "h1")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert done.returncode == 3 and f"{group_dir} above it belongs to another user, or others (or a group" in done.stderr
    os.chown(group_dir, 0, os.getgid())  # the user's own group (user-private groups): as ssh allows
    ok = subprocess.run(["sh", "-c", start_agent(sys.executable, str(group_dir / "heet"), NAME, "h1")],
                        stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == NEED_AGENT, ok.stderr


def test_what_the_login_shell_printed_is_logged_inert(caplog):
    """A .bashrc's escape sequences reached `tail -f controller.log` raw: the terminal was retitled
    and cleared."""
    import asyncio
    import logging

    from heet_tui.cluster.login_output import first_command_line

    async def read() -> bytes:
        stream = asyncio.StreamReader()
        stream.feed_data(b"hello \x1b]0;TITLE\x07\x1b[2J\xe2\x80\xae\n" + SHELL_READY.encode() + b"\nfirst\n")
        stream.feed_eof()
        return await first_command_line(stream, 5.0, "h1")

    with caplog.at_level(logging.INFO, logger="heet_tui.cluster.login_output"):
        assert asyncio.run(read()) == b"first\n"
    said = caplog.records[-1].getMessage()
    assert said.endswith("(skipped): hello \\u202e") and "\x1b" not in said, said


def test_an_upload_that_fails_leaves_no_partial_copy(tmp_path):
    """A full disk left one zero-byte heet-agent-*.pyz.tmp.* per attempt (twelve in a night)."""
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    workdir = tmp_path / "w"
    # a file-size limit of 0 blocks (ulimit -f): cat's first write is refused, as on a full disk
    failed = subprocess.run(["sh", "-c", "ulimit -f 0; " + upload_with_cat(str(workdir), NAME)], input=b"x" * 4096,
                            env=env, capture_output=True)
    assert failed.returncode != 0
    assert workdir.is_dir() and list(workdir.iterdir()) == [], "no partial copy, no agent"
