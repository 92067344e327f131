"""`heet-tui hosts trust`: which hosts file it reads, and what it records for a new, a changed, a
hashed or a system-wide key (against real sshd hosts, the `lab` fixture)."""

from __future__ import annotations

import subprocess

from heet_tui.cli.hosts_check import run_trust
from heet_tui.config.hosts_file import load_hosts


def test_hosts_trust_without_hosts_uses_the_file_the_states_controller_runs_on(lab, capsys, monkeypatch, tmp_path):
    """The hint ("heet-tui hosts trust gamma") came from a controller run with --hosts F; run as
    printed, it read the default file and said 'local.toml: no host named "gamma"'."""
    from heet_tui.cli.main import main
    from heet_tui.control.store import Store

    monkeypatch.delenv("HEET_HOSTS", raising=False)
    newcomer = lab.add_host("newcomer", trusted=False)
    path = lab.hosts_toml([lab.entry_for(newcomer)])
    Store(tmp_path / "state").set_setting("hosts_path", str(path))  # as a controller records it
    assert main(["--state", str(tmp_path / "state"), "hosts", "trust", "newcomer", "--yes"]) == 0
    assert "SHA256:" in capsys.readouterr().out
    assert main(["--state", str(tmp_path / "elsewhere"), "hosts", "trust", "newcomer", "--yes"]) == 2
    assert 'no host named "newcomer"' in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists(), "asking created no state"


def test_yes_never_replaces_a_changed_key_and_fingerprint_does_only_for_that_key(lab, capsys):
    """`hosts trust NAME --yes` replaced a changed key (what a man-in-the-middle looks like) with exit 0."""
    other, host = lab.add_host("other"), lab.add_host("reinstalled", trusted=False)
    impostor = other.host_public.split()
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"[{host.address}]:{host.port} {impostor[0]} {impostor[1]}\n")
    before = lab.known_hosts.read_text()
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(host)]))
    assert run_trust(hosts, "reinstalled", assume_yes=True) == 1
    said = capsys.readouterr().out
    assert "the key CHANGED" in said and "Refused: --yes does not replace a changed key" in said
    offered = said.split("heet-tui hosts trust reinstalled --fingerprint ")[1].split()[0]
    assert lab.known_hosts.read_text() == before
    assert run_trust(hosts, "reinstalled", assume_yes=False, fingerprint="SHA256:" + "A" * 43) == 1
    assert lab.known_hosts.read_text() == before, "another fingerprint: refused"
    said = capsys.readouterr().out
    assert "not the fingerprint you gave (SHA256:AAAA" in said and "--yes" not in said, "it was not given"
    assert run_trust(hosts, "reinstalled", assume_yes=False, fingerprint=offered) == 0
    assert "Recorded in" in capsys.readouterr().out and lab.known_hosts.read_text() != before


def test_trusting_a_changed_key_replaces_the_old_one_hashed_or_listed(lab, capsys):
    """The old key stayed beside the new one when its line was hashed (ssh-keygen -H) or named
    the host among others, and both keys were accepted."""
    other, host = lab.add_host("other"), lab.add_host("reinstalled", trusted=False)
    impostor = other.host_public.split()
    pattern = f"[{host.address}]:{host.port}"
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"{pattern} {impostor[0]} {impostor[1]}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(lab.known_hosts)], check=True, capture_output=True)
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"{pattern},10.9.9.9 {impostor[0]} {impostor[1]}\n")
    assert lab.known_hosts.read_text().count(impostor[1]) == 3, "the other host's, the hashed line, the list"
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(host)]))
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{host.host_key}.pub"], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    assert run_trust(hosts, "reinstalled", assume_yes=False, fingerprint=fingerprint) == 0
    assert "the key CHANGED" in capsys.readouterr().out
    text = lab.known_hosts.read_text()
    assert text.count(impostor[1]) == 1, f"the other host's own key only: {text}"
    assert f"{pattern} {host.host_public.split()[0]} {host.host_public.split()[1]}" in text


def test_a_fingerprint_that_is_not_the_hosts_is_refused_at_first_contact_too(lab, capsys):
    """It asked "Trust it?" after printing the other key, and an admin who had passed the key they
    checked answered y; without a terminal it said to pass --yes."""
    host = lab.add_host("fresh", trusted=False)
    before = lab.known_hosts.read_text()
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(host)]))
    assert run_trust(hosts, "fresh", assume_yes=False, fingerprint="SHA256:" + "B" * 43) == 1
    said = capsys.readouterr().out
    assert "Refused: that is not the fingerprint you gave (SHA256:BBBB" in said and "pass --yes" not in said
    assert lab.known_hosts.read_text() == before


def test_hosts_check_names_the_hosts_file_in_the_trust_command_it_prints(lab, capsys):
    """Run as printed, "heet-tui hosts trust NAME" read the default hosts file: "no host named NAME"."""
    from heet_tui.cli.main import main

    newcomer = lab.add_host("newcomer", trusted=False)
    path = lab.hosts_toml([lab.entry_for(newcomer)])
    assert main(["hosts", "check", "--hosts", str(path)]) == 1
    said = capsys.readouterr().out
    assert f"then run: heet-tui hosts trust newcomer --hosts {path}\n" in said, said
    # and the hint in the host's own message (pasted, it said 'no host named "newcomer"')
    assert f"(heet-tui hosts trust newcomer --hosts {path})" in said and "(heet-tui hosts trust newcomer)" not in said


def test_a_key_the_systems_known_hosts_holds_otherwise_is_a_changed_key_and_yes_does_not_take_it(lab, capsys):
    """GlobalKnownHostsFile (by default /etc/ssh/ssh_known_hosts) was not read: a key OpenSSH calls
    CHANGED was taken as merely unknown, and `hosts trust --yes` recorded it."""
    from heet_tui.cluster.loopback_sshd import _keygen

    host = lab.add_host("site", trusted=False)
    kind, blob = _keygen(lab.root / "distributed_key").split()[:2]  # the key the site hands out
    (lab.root / "global_known_hosts").write_text(f"[{host.address}]:{host.port} {kind} {blob}\n")
    lab.write_ssh_config(lab.user_key, extra=f"Host *\n  GlobalKnownHostsFile {lab.root / 'global_known_hosts'}\n")
    before = lab.known_hosts.read_text()
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(host)]))
    assert run_trust(hosts, "site", assume_yes=True) == 1
    said = capsys.readouterr().out
    assert "the key CHANGED" in said and "Refused: --yes does not replace a changed key" in said
    assert lab.known_hosts.read_text() == before


def test_with_an_untrusted_jump_host_each_hops_fingerprint_is_given_and_a_mismatch_names_the_jump_host(lab, capsys):
    """Seen: `hosts trust a --fingerprint <a's>` with the bastion not trusted yet said "that is not
    the fingerprint you gave", of the bastion's key, as if a's were wrong; and no one call could
    trust both."""
    jump, target = lab.add_host("gate", trusted=False), lab.add_host("inside", trusted=False)
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(target, jump=f"root@{jump.address}:{jump.port}")]))

    def fingerprint(server) -> str:
        return subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{server.host_key}.pub"], check=True,
                              capture_output=True, text=True).stdout.split()[1]

    assert run_trust(hosts, "inside", assume_yes=False, fingerprint=[fingerprint(target)]) == 1
    said = capsys.readouterr().out
    assert f"Refused: the jump host {jump.address}'s key is not trusted yet" in said, said
    assert "--fingerprint <" in said and "Not trusted." not in said, "one refusal, said once"
    assert jump.known_hosts_line not in lab.known_hosts.read_text()
    assert run_trust(hosts, "inside", assume_yes=False, fingerprint=[fingerprint(jump), fingerprint(target)]) == 0
    known = lab.known_hosts.read_text()
    assert jump.known_hosts_line in known and target.known_hosts_line in known


def test_the_command_a_refusal_suggests_names_the_hosts_file_it_was_given(lab, capsys, monkeypatch, tmp_path):
    """`hosts trust x --yes --hosts h2.toml` on a changed key suggested `heet-tui hosts trust x
    --fingerprint ...`, which, run as written, looked in the default file, where x was not."""
    from heet_tui.cli.main import main

    monkeypatch.delenv("HEET_HOSTS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    other, host = lab.add_host("other2"), lab.add_host("rekeyed", trusted=False)
    impostor = other.host_public.split()
    with open(lab.known_hosts, "a") as fh:
        fh.write(f"[{host.address}]:{host.port} {impostor[0]} {impostor[1]}\n")
    path = lab.hosts_toml([lab.entry_for(host)])
    assert main(["hosts", "trust", "rekeyed", "--yes", "--hosts", str(path), "--state", str(tmp_path / "st")]) == 1
    said = capsys.readouterr().out
    assert f"then: heet-tui hosts trust rekeyed --hosts {path} --fingerprint SHA256:" in said, said


def test_a_host_key_alias_is_the_name_a_key_is_trusted_and_checked_under_as_ssh_does(lab, capsys):
    """With HostKeyAlias (behind a jump host too), trust recorded the key under the address while
    the connection looked up the alias: the trusted key read as unknown, `--yes` then took a changed
    key for new, and the key just recorded was called CHANGED, round and round; plain ssh found none."""
    import asyncio

    from heet_tui.cluster.hostkeys import fetch_host_key_fingerprint

    jump, target, other = lab.add_host("gate", trusted=False), lab.add_host("inside", trusted=False), lab.add_host("o")
    lab.write_ssh_config(lab.user_key, extra=(
        f"Host gate-alias\n  HostName {jump.address}\n  Port {jump.port}\n  HostKeyAlias bastion.lab.example\n"
        f"Host inside-alias\n  HostName {target.address}\n  Port {target.port}\n  HostKeyAlias gpu-c2.lab.example\n"
        "  ProxyJump gate-alias\n"))
    path = lab.hosts_toml([{"name": "inside", "address": "inside-alias", "workdir": str(target.workdir)}])
    hosts = load_hosts(path)

    def fingerprint(server) -> str:
        return subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{server.host_key}.pub"], check=True,
                              capture_output=True, text=True).stdout.split()[1]

    assert run_trust(hosts, "inside", assume_yes=False, fingerprint=[fingerprint(jump), fingerprint(target)]) == 0
    known = lab.known_hosts.read_text()
    assert f"bastion.lab.example {' '.join(jump.host_public.split()[:2])}" in known, known
    assert f"gpu-c2.lab.example {' '.join(target.host_public.split()[:2])}" in known, known
    found = asyncio.run(fetch_host_key_fingerprint(hosts.hosts[0], lab.ssh_config))
    assert found.trusted and not found.changed and found.via == "", "trusted where it was recorded"
    ssh = subprocess.run(["ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes", "inside-alias", "true"],
                         capture_output=True, text=True, timeout=30)
    assert ssh.returncode == 0, f"OpenSSH reads the same entries: {ssh.stderr}"
    # another key under the alias is a changed key, which --yes does not take
    impostor = other.host_public.split()
    lab.known_hosts.write_text(known.replace(target.host_public.split()[1], impostor[1]))
    capsys.readouterr()
    assert run_trust(hosts, "inside", assume_yes=True) == 1
    said = capsys.readouterr().out
    assert "the key CHANGED" in said and "Refused: --yes does not replace a changed key" in said, said


def test_with_hash_known_hosts_a_trusted_keys_host_name_is_written_hashed(lab, capsys):
    """ssh keeps the file hashed; trust added a plain line naming the host beside the hashed ones."""
    from heet_tui.cluster.known_hosts_lines import names_host

    host = lab.add_host("hashed", trusted=False)
    lab.write_ssh_config(lab.user_key, extra="Host *\n  HashKnownHosts yes\n")
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(host)]))
    assert run_trust(hosts, "hashed", assume_yes=True) == 0
    line = lab.known_hosts.read_text().splitlines()[-1]
    assert line.startswith("|1|") and host.address not in line, line
    assert names_host(line.split()[0], f"[{host.address}]:{host.port}")
    ssh = subprocess.run(["ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes", "-p", str(host.port),
                          host.address, "true"], capture_output=True, text=True, timeout=30)
    assert ssh.returncode == 0, f"OpenSSH reads the hashed line: {ssh.stderr}"
    assert "already trusted" in _trust_again(hosts, capsys)
    # as ssh resolves it for the host: a "no" in another host's block first hid the "yes" of Host *,
    # and a "yes" in another host's block alone hashed this one's
    other = lab.add_host("plain", trusted=False)
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(other)]))
    lab.write_ssh_config(lab.user_key, extra="Host legacy-box\n  HashKnownHosts no\nHost *\n  HashKnownHosts yes\n")
    assert run_trust(hosts, "plain", assume_yes=True) == 0
    assert lab.known_hosts.read_text().splitlines()[-1].startswith("|1|")
    third = lab.add_host("third", trusted=False)
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(third)]))
    lab.write_ssh_config(lab.user_key, extra="Host elsewhere\n  HashKnownHosts yes\n")
    assert run_trust(hosts, "third", assume_yes=True) == 0
    assert lab.known_hosts.read_text().splitlines()[-1].startswith(f"[{third.address}]:{third.port} ")


def _trust_again(hosts, capsys) -> str:
    capsys.readouterr()
    run_trust(hosts, hosts.hosts[0].name, assume_yes=True)
    return capsys.readouterr().out


def test_a_refusal_after_a_jump_hosts_key_was_recorded_does_not_say_nothing_was(lab, capsys):
    jump, target = lab.add_host("gate", trusted=False), lab.add_host("inside", trusted=False)
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(target, jump=f"root@{jump.address}:{jump.port}")]))
    gate = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{jump.host_key}.pub"], check=True,
                          capture_output=True, text=True).stdout.split()[1]
    assert run_trust(hosts, "inside", assume_yes=False, fingerprint=[gate]) == 1
    said = capsys.readouterr().out
    assert "Recorded in" in said and jump.known_hosts_line in lab.known_hosts.read_text()
    assert said.rstrip().endswith("nothing more was recorded (the key recorded above stays)."), said
