"""Each way a host can fail maps to its own state and message, and never disturbs the others."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest
from helpers import run_settled, statuses, wait_until

from heet_tui.cluster import HostChanged, HostKeyUnknown
from heet_tui.core.host import HostState


def test_wrong_user_key_is_auth_failed_retried_slowly_and_fixed_in_the_ssh_config(lab):
    a = lab.add_host("locked")
    stranger = lab.root / "id_stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    lab.write_ssh_config(stranger)

    async def scenario(cluster):
        refused = cluster.host_status("locked")
        events = cluster.events()
        await asyncio.sleep(3.0)  # the usual back-off (1 s at most here) would have tried three times
        tries = 0
        while (event := events.get_nowait()) is not None:
            tries += isinstance(event, HostChanged) and event.status.state is HostState.CONNECTING
        lab.write_ssh_config(lab.user_key)  # the user fixes ~/.ssh/config, then presses c
        await cluster.reconnect("locked")
        return refused, tries, await cluster.wait_for_state("locked", HostState.READY, 20)

    refused, tries, ready = run_settled(lab.hosts_toml([lab.entry_for(a)]), scenario)
    assert refused.state is HostState.AUTH_FAILED, refused.message
    assert "permission denied" in refused.message and "tried again in 1 min" in refused.message
    # which key was offered, and whose authorized_keys must hold it: it said only "check
    # IdentityFile, ssh-agent and authorized_keys"
    user = os.environ.get("USER") or "root"
    assert f"it offered {stranger} (IdentityFile)" in refused.message, refused.message
    assert f"authorized_keys for {user} must hold" in refused.message, refused.message
    assert tries == 0, "not retried within seconds: sshd and fail2ban ban an address that keeps failing"
    assert ready, "the SSH config is read again at a reconnect"


def test_unknown_host_key_is_refused_with_fingerprint_then_trusted(lab):
    known, unknown = lab.add_host("known"), lab.add_host("newcomer", trusted=False)
    expected = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{unknown.host_key}.pub"],
                              check=True, capture_output=True, text=True).stdout.split()[1]
    path = lab.hosts_toml([lab.entry_for(known), lab.entry_for(unknown)])

    async def scenario(cluster):
        # The refused host is retried with back-off, so it is "connecting" now and then: read it
        # while it is refused (a read right after settling, or even right after the wait below
        # returned, caught a retry under load: the wait's task ends a loop turn before this).
        for _ in range(20):
            assert await cluster.wait_for_state("newcomer", HostState.HOST_KEY_UNKNOWN, 15)
            before, fingerprint = cluster.host_status("newcomer"), cluster.fingerprint("newcomer")
            if before.state is HostState.HOST_KEY_UNKNOWN:
                break
        other = cluster.host_status("known").state
        try:
            await cluster.trust("newcomer", "SHA256:not-the-key")
            wrong_accepted = True
        except HostKeyUnknown:
            wrong_accepted = False
        written = await cluster.trust("newcomer", fingerprint)
        ready = await cluster.wait_for_state("newcomer", HostState.READY, 15)
        return before, other, fingerprint, wrong_accepted, written, ready

    before, other, fingerprint, wrong_accepted, written, ready = run_settled(path, scenario)
    assert before.state is HostState.HOST_KEY_UNKNOWN
    assert expected in before.message and fingerprint == expected
    assert other is HostState.READY
    assert not wrong_accepted
    assert written.path == lab.known_hosts and written.stale == "", "the known_hosts file the SSH config names"
    assert unknown.known_hosts_line in lab.known_hosts.read_text()
    assert ready


def test_garbage_on_agent_stdout_is_agent_error_quoting_it(lab):
    noisy, quiet = lab.add_host("noisy"), lab.add_host("quiet")
    wrapper = lab.root / "noisy-python"
    wrapper.write_text("#!/bin/sh\necho 'Welcome to the cluster! Quota: 3%'\nexec /usr/bin/python3 \"$@\"\n")
    wrapper.chmod(0o755)
    path = lab.hosts_toml([lab.entry_for(noisy, python=str(wrapper)), lab.entry_for(quiet)])
    status = run_settled(path, statuses)
    assert status["noisy"].state is HostState.AGENT_ERROR
    assert "Welcome to the cluster! Quota: 3%" in status["noisy"].message
    assert status["quiet"].state is HostState.READY


def test_what_the_login_shell_prints_first_is_skipped_unless_it_never_ends(lab):
    """A .bashrc that echoes a welcome line is common on lab hosts and often not the user's to
    change: every such host was refused as "printed 'Welcome ...' before the agent banner"."""
    chatty, endless = lab.add_host("chatty"), lab.add_host("endless")
    chatty.home.mkdir(parents=True, exist_ok=True)
    (chatty.home / ".bashrc").write_text('echo "Welcome to the lab. Quota: 80% used"\necho \'{"event": "x"}\'\n')
    endless.home.mkdir(parents=True, exist_ok=True)
    (endless.home / ".bashrc").write_text("yes 'module: loaded cuda/12' | head -n 2000\n")
    status = run_settled(lab.hosts_toml([lab.entry_for(chatty), lab.entry_for(endless)]), statuses)
    assert status["chatty"].state is HostState.READY, status["chatty"].message
    assert status["endless"].state is HostState.AGENT_ERROR
    assert "the login shell printed over 500 lines" in status["endless"].message
    assert "module: loaded cuda/12" in status["endless"].message


def test_missing_python_is_agent_error_with_the_shells_message(lab):
    a = lab.add_host("nopython")
    path = lab.hosts_toml([lab.entry_for(a, python="/nonexistent/python3")])
    status = run_settled(path, statuses)["nopython"]
    assert status.state is HostState.AGENT_ERROR
    assert "/nonexistent/python3" in status.message
    assert status.message.endswith("; set python = in the hosts file to a Python 3 this host has"), "the next step"


def test_without_sftp_the_agent_is_deployed_with_cat(lab):
    a = lab.add_host("nosftp", sftp=False)
    status = run_settled(lab.hosts_toml([lab.entry_for(a)]), statuses)["nosftp"]
    assert status.state is HostState.READY, status.message
    (agent,) = a.workdir.glob("heet-agent-*.pyz")
    assert agent.stat().st_mode & 0o777 == 0o600, "private, as over SFTP"


def test_jump_host_path(lab):
    jump, target = lab.add_host("login"), lab.add_host("inner")
    user = "root"
    path = lab.hosts_toml([lab.entry_for(target, jump=f"{user}@{jump.address}:{jump.port}")])

    async def scenario(cluster):
        ready = cluster.host_status("inner")
        jump.kill()  # the target's own sshd keeps running: only the path through the jump breaks
        lost = await cluster.wait_for_state("inner", HostState.UNREACHABLE, 15)
        return ready, lost, cluster.host_status("inner").message

    ready, lost, message = run_settled(path, scenario)
    assert ready.state is HostState.READY, ready.message
    assert lost
    assert "jump" in message or "lost" in message


def test_ssh_config_alias_with_proxyjump(lab):
    """The hosts file names only an alias; HostName, Port and ProxyJump come from the SSH config."""
    jump, target = lab.add_host("bastion"), lab.add_host("behind")
    lab.write_ssh_config(lab.user_key, extra=(
        f"Host behind-alias\n  HostName {target.address}\n  Port {target.port}\n"
        f"  ProxyJump {jump.address}:{jump.port}\n\n"))
    path = lab.hosts_toml([{"name": "behind", "address": "behind-alias", "workdir": str(target.workdir)}])

    async def scenario(cluster):
        ready = cluster.host_status("behind")
        jump.kill()
        lost = await cluster.wait_for_state("behind", HostState.UNREACHABLE, 15)
        return ready, lost

    ready, lost = run_settled(path, scenario)
    assert ready.state is HostState.READY, ready.message
    assert lost  # the path really went through the bastion


def test_a_jump_hosts_own_proxyjump_is_gone_through_as_ssh_does(lab):
    """`far` is behind login2, which is behind login1 (each only reachable from the one before):
    the second jump was made straight to login2."""
    login1, login2, far = lab.add_host("login1"), lab.add_host("login2"), lab.add_host("far")
    lab.write_ssh_config(lab.user_key, extra=(
        f"Host login1\n  HostName {login1.address}\n  Port {login1.port}\n\n"
        f"Host login2\n  HostName {login2.address}\n  Port {login2.port}\n  ProxyJump login1\n\n"
        f"Host far\n  HostName {far.address}\n  Port {far.port}\n  ProxyJump login2\n  ConnectTimeout 3\n\n"))
    path = lab.hosts_toml([{"name": "far", "address": "far", "workdir": str(far.workdir)}])

    async def scenario(cluster):
        ready = cluster.host_status("far")
        login1.kill()  # login2 and far keep running: only the path through login1 breaks
        return ready, await cluster.wait_for_state("far", HostState.UNREACHABLE, 15)

    ready, lost = run_settled(path, scenario)
    assert ready.state is HostState.READY, ready.message
    assert lost, "the path went through login1"


def test_missing_ssh_config_is_a_clear_host_error(lab, tmp_path):
    a = lab.add_host("cfg")
    path = lab.hosts_toml([lab.entry_for(a, emulate={"gpu_type": "T4", "count": 1, "speed": 1.0})])
    path.write_text(path.read_text().replace(str(lab.ssh_config), str(tmp_path / "no-such-config")))
    status = run_settled(path, statuses)["cfg"]
    assert status.state is HostState.UNREACHABLE
    assert "no-such-config" in status.message and "No such file" in status.message
    assert status.gpus == () and status.declared_type == "T4", "never reached, its declared type is known"


def test_a_host_met_while_the_ssh_config_was_broken_connects_once_it_is_fixed(lab, tmp_path):
    """The error was kept for good: every reconnect said the old one until a restart."""
    a = lab.add_host("cfg")
    path = lab.hosts_toml([lab.entry_for(a)])
    broken = tmp_path / "ssh_config"
    broken.write_text('Match originalhost x exec "test %n = x"\n')  # asyncssh cannot parse it
    path.write_text(path.read_text().replace(str(lab.ssh_config), str(broken)))

    async def scenario(cluster):
        before = cluster.host_status("cfg")
        broken.write_text(lab.ssh_config.read_text())
        await cluster.reconnect("cfg")
        return before, await cluster.wait_for_state("cfg", HostState.READY, 30), cluster.host_status("cfg").message

    before, ready, message = run_settled(path, scenario)
    assert before.state is HostState.UNREACHABLE and str(broken) in before.message, before.message
    assert "as asyncssh, which heet-tui connects with, reads it" in before.message, "OpenSSH reads the line"
    assert ready, message


def test_changed_host_key_is_flagged_and_an_approved_key_replaces_the_old_one(lab):
    other, host = lab.add_host("other"), lab.add_host("reinstalled", trusted=False)
    impostor = other.host_public.split()  # known_hosts says "reinstalled" has other's key
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"[{host.address}]:{host.port} {impostor[0]} {impostor[1]}\n")
    path = lab.hosts_toml([lab.entry_for(host)])

    async def scenario(cluster):
        before = cluster.host_status("reinstalled")
        await cluster.trust("reinstalled", cluster.fingerprint("reinstalled"))
        return before, await cluster.wait_for_state("reinstalled", HostState.READY, 15)

    before, ready = run_settled(path, scenario)
    assert before.state is HostState.HOST_KEY_CHANGED and "HOST KEY CHANGED" in before.message
    assert ready
    lines = lab.known_hosts.read_text().splitlines()
    assert host.known_hosts_line in lines
    assert not any(line.startswith(f"[{host.address}]:{host.port} ") and impostor[1] in line for line in lines)
    assert other.known_hosts_line in lines  # other hosts' entries untouched


def test_an_unknown_jump_host_key_is_trusted_first_then_the_hosts_own(lab, capsys):
    """Seen: "via jump gw: unknown host key ...; trust it (heet-tui hosts trust node2)", and then
    that very command failed the same way: it read node2's key through the tunnel gw refused."""
    from heet_tui.cli.hosts_check import run_trust
    from heet_tui.config.hosts_file import load_hosts

    jump, target = lab.add_host("gate", trusted=False), lab.add_host("inside", trusted=False)
    hop = f"root@{jump.address}:{jump.port}"
    path = lab.hosts_toml([lab.entry_for(target, jump=hop)])

    async def scenario(cluster):
        assert await cluster.wait_for_state("inside", HostState.HOST_KEY_UNKNOWN, 15)
        first = cluster.host_status("inside").message
        await cluster.trust("inside", cluster.fingerprint("inside"))
        assert await wait_until(lambda: "via jump" not in cluster.host_status("inside").message
                                and cluster.host_status("inside").state is HostState.HOST_KEY_UNKNOWN, 20)
        return first, cluster.host_status("inside").message

    first, second = run_settled(path, scenario)
    assert first.startswith(f"via jump {jump.address}: unknown host key"), first
    assert jump.known_hosts_line in lab.known_hosts.read_text() and "unknown host key" in second
    assert target.known_hosts_line not in lab.known_hosts.read_text(), "only what was approved"
    capsys.readouterr()
    assert run_trust(load_hosts(path), "inside", assume_yes=True) == 0  # the command walks the rest
    assert target.known_hosts_line in lab.known_hosts.read_text()
    assert f"Host inside ({target.address}:{target.port}) presents" in capsys.readouterr().out


def test_a_revoked_host_key_is_said_revoked_and_cannot_be_trusted(lab):
    """It read "HOST KEY CHANGED", and trusting it said "already trusted", round and round."""
    from heet_tui.cli.errors import CliError
    from heet_tui.cli.hosts_check import run_trust
    from heet_tui.config.hosts_file import load_hosts

    host = lab.add_host("rev")  # its key is trusted, and revoked beside it
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"@revoked * {' '.join(host.host_public.split()[:2])}\n")
    path = lab.hosts_toml([lab.entry_for(host)])
    status = run_settled(path, statuses)["rev"]
    assert status.state is HostState.UNREACHABLE and "is REVOKED (an @revoked line of" in status.message, \
        status.message
    with pytest.raises(CliError, match="is REVOKED"):
        run_trust(load_hosts(path), "rev", assume_yes=True)


def test_a_workdir_others_may_write_is_an_agent_error_that_says_so_and_runs_nothing(lab, tmp_path):
    from heet_tui.cluster.agent_bundle import agent_bundle

    shared = tmp_path / "shared-workdir"
    shared.mkdir()
    planted = shared / agent_bundle().file_name  # its name is a hash anyone can work out
    planted.write_text("open(__file__ + '.RAN', 'w').close()\n")
    shared.chmod(0o777)
    host, local = lab.add_host("shared"), tmp_path / "local-shared"
    local.mkdir(mode=0o777)
    local.chmod(0o777)
    path = lab.hosts_toml([lab.entry_for(host, workdir=str(shared)),
                           {"name": "mine", "transport": "local", "workdir": str(local),
                            "emulate": {"gpu_type": "T4", "count": 1, "speed": 1.0}}])
    status = run_settled(path, statuses)
    for name, where in (("shared", shared), ("mine", local)):
        assert status[name].state is HostState.AGENT_ERROR, status[name]
        assert f"workdir {where} is not yours alone" in status[name].message, status[name].message
    assert not list(tmp_path.rglob("*.RAN")), "nothing ran from it"


def test_a_missing_key_file_names_the_file_and_where_it_is_set(lab):
    """It said "cannot connect to root@127.0.0.4:54501: No such file or directory", as unreachable."""
    a = lab.add_host("nokey")
    missing = lab.root / "id_does_not_exist"
    lab.write_ssh_config(missing)

    async def scenario(cluster):
        return cluster.host_status("nokey")

    status = run_settled(lab.hosts_toml([lab.entry_for(a)]), scenario)
    assert status.state is HostState.AUTH_FAILED, status.message
    assert f"the key file {missing} does not exist" in status.message, status.message
    assert "IdentityFile of your ssh config" in status.message


def test_a_missing_key_file_beside_one_that_works_is_skipped_as_ssh_skips_it(lab):
    """A config listing a key absent on this machine before one that works: ssh logged in, heet
    said auth-failed ("the key file ... does not exist")."""
    a = lab.add_host("twokeys")
    lab.ssh_config.write_text(lab.ssh_config.read_text().replace(
        f"  IdentityFile {lab.user_key}\n", f"  IdentityFile {lab.root / 'id_absent'}\n  IdentityFile {lab.user_key}\n"))

    async def scenario(cluster):
        return cluster.host_status("twokeys")

    status = run_settled(lab.hosts_toml([lab.entry_for(a)]), scenario)
    assert status.state is HostState.READY, status.message


def test_an_ssh_config_others_may_change_is_refused(lab):
    """Its ProxyCommand ran as the user from a ~/.ssh/config another user owned, which ssh refuses
    ("Bad owner or permissions")."""
    a = lab.add_host("cfg")
    lab.ssh_config.chmod(0o666)

    async def scenario(cluster):
        return cluster.host_status("cfg")

    status = run_settled(lab.hosts_toml([lab.entry_for(a)]), scenario)
    assert f"ssh_config {lab.ssh_config}: refused: every user can write it" in status.message, status.message
    assert status.state is not HostState.READY


def test_an_included_ssh_config_others_may_change_is_refused(lab):
    """A config of the user's that Includes a file another user may change: its ProxyCommand ran."""
    a = lab.add_host("inc")
    included = lab.root / "included_config"
    included.write_text("# nothing yet\n")
    included.chmod(0o666)
    lab.ssh_config.write_text(f"Include {included}\n" + lab.ssh_config.read_text())

    async def scenario(cluster):
        return cluster.host_status("inc")

    status = run_settled(lab.hosts_toml([lab.entry_for(a)]), scenario)
    assert f"ssh_config {included}: refused: every user can write it" in status.message, status.message



def test_trusting_a_changed_key_says_which_other_known_hosts_file_still_accepts_the_old_one(lab):
    """`hosts trust` said so; trusting in the TUI did not, and the second UserKnownHostsFile went on
    accepting the old key (what a man-in-the-middle would present) without a word."""
    other, host = lab.add_host("other"), lab.add_host("rebuilt", trusted=False)
    first, second = lab.root / "known_first", lab.root / "known_second"
    impostor = other.host_public.split()
    first.write_text(f"[{host.address}]:{host.port} {impostor[0]} {impostor[1]}\n")
    second.write_text(f"[{host.address}]:{host.port} {impostor[0]} {impostor[1]}\n")
    lab.write_ssh_config(lab.user_key, extra=f"Host *\n  UserKnownHostsFile {first} {second}\n")
    path = lab.hosts_toml([lab.entry_for(host)])

    async def scenario(cluster):
        assert cluster.host_status("rebuilt").state is HostState.HOST_KEY_CHANGED
        return await cluster.trust("rebuilt", cluster.fingerprint("rebuilt"))

    recorded = run_settled(path, scenario)
    assert recorded.path == first and host.known_hosts_line in first.read_text().splitlines()
    assert recorded.stale.startswith(f"; {second} still holds its old key, which is still accepted: remove it with "
                                     f"ssh-keygen -R '[{host.address}]:{host.port}' -f {second}"), recorded.stale


def test_a_known_hosts_file_that_is_a_link_is_written_where_it_links(lab):
    """It was replaced by a plain file: the dotfiles copy it linked to never got the key."""
    host = lab.add_host("fresh", trusted=False)
    (lab.root / "dotfiles").mkdir()
    real, link = lab.root / "dotfiles" / "known_hosts", lab.root / "known_link"
    real.write_text("# kept in a dotfiles repo\n")
    link.symlink_to(real)
    lab.write_ssh_config(lab.user_key, extra=f"Host *\n  UserKnownHostsFile {link}\n")
    path = lab.hosts_toml([lab.entry_for(host)])

    async def scenario(cluster):
        return await cluster.trust("fresh", cluster.fingerprint("fresh"))

    run_settled(path, scenario)
    assert link.is_symlink(), "the link is left a link"
    assert real.read_text().splitlines() == ["# kept in a dotfiles repo", host.known_hosts_line]
