"""What a host that cannot serve says: the cause, and the next step where there is one."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from helpers import make_cluster, run_settled, statuses, wait_until

from heet_tui.core.host import HostState


def test_a_workdir_the_agent_cannot_be_written_to_is_said_so_when_the_shell_exits_first(lab, tmp_path, monkeypatch):
    """Under load, the upload's shell failed and closed its channel before the agent file was sent
    into it: the host read "unreachable: connection failed while starting the agent: Channel not
    open for sending", and only now and then the real reason. Sessions open slowly here, so the
    shell always exits first."""
    import asyncssh

    # sysfs takes no new files, from root either: a workdir that exists, is the user's, and cannot be
    # written (chattr +i did the same where the filesystem has it)
    frozen = Path("/sys/kernel")
    assert frozen.is_dir()
    real = asyncssh.SSHClientConnection.create_session

    async def slow_session(self, *args, **kwargs):
        opened = await real(self, *args, **kwargs)
        await asyncio.sleep(1.0)  # the remote command runs, fails and closes meanwhile
        return opened

    monkeypatch.setattr(asyncssh.SSHClientConnection, "create_session", slow_session)
    host = lab.add_host("frozen", sftp=False)
    status = run_settled(lab.hosts_toml([lab.entry_for(host, workdir=str(frozen))]), statuses)["frozen"]
    assert status.state is HostState.AGENT_ERROR, status
    assert f"cannot deploy the agent to {frozen}" in status.message and "Permission denied" in status.message
    assert status.message.endswith("give the host a workdir it may write (workdir = in the hosts file)")



def test_a_host_that_never_answers_says_why_while_it_is_tried_again(lab, tmp_path):
    """A hung host (its sshd stopped) flipped between "connecting (attempt 4)", with no reason,
    and "timed out", with no next step."""
    from heet_tui.cluster import ClusterOptions

    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(8)  # connections are taken by the kernel, and nothing ever answers on them
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "hung"\naddress = "127.0.0.1"\nport = {mute.getsockname()[1]}\n')
    options = ClusterOptions(backoff_initial_s=0.2, backoff_max_s=0.5, connect_timeout_s=1.0, probes=())
    seen: list[str] = []

    async def main():
        cluster = make_cluster(path, options)
        await cluster.start()
        try:
            def retried() -> bool:
                seen.append(cluster.host_status("hung").message)
                return seen[-1].startswith("connecting (attempt 2; the last one: ")
            assert await wait_until(retried, 30), seen[-3:]
        finally:
            await cluster.stop()

    try:
        asyncio.run(main())
    finally:
        mute.close()
    assert "timed out after 1 s (no answer: is the host up, and its sshd not hung? Over a slow link the login may " \
           "need longer: ConnectTimeout in the SSH config allows more)" in seen[-1], seen[-1]


def test_a_hosts_stderr_is_quoted_within_bounds(tmp_path):
    """A python that wrote a 2 MB line to stderr: `hosts check` printed all 2 MB, and the host's
    error carried it to `status`, the TUI and the store."""
    from heet_tui.cluster.channel import MAX_STDERR_LINE

    loud = tmp_path / "loud-python.sh"
    loud.write_text("#!/bin/sh\nhead -c 2000000 /dev/zero | tr '\\0' A >&2\necho ' the end' >&2\nexit 3\n")
    loud.chmod(0o755)
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "loud"\ntransport = "local"\npython = "{loud}"\n'
                    f'workdir = "{tmp_path / "work"}"\n')
    status = run_settled(path, statuses)["loud"]
    assert status.state is HostState.AGENT_ERROR, status
    assert len(status.message) < 3 * MAX_STDERR_LINE and " characters ...] AAA" in status.message, status.message[:300]
    assert status.message.endswith("the end"), status.message[-100:]
