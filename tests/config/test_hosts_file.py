"""The host list: valid files load into dataclasses, every bad one gets one precise message."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import bundled_config, load_hosts, parse_hosts_text, resolve_hosts_path

DATA = Path(__file__).resolve().parent.parent / "data" / "config"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("unknown_key.toml", 'unknown_key.toml:12: host "gpu3": unknown key "gpu" (did you mean "gpus"?)'),
        ("duplicate_name.toml", 'duplicate_name.toml:4: duplicate host name "gpu1" (first defined at line 1)'),
        ("bad_port.toml", 'bad_port.toml:3: host "gpu1": key "port": 70000 is out of range (expected from 1 to 65535)'),
        ("bad_transport.toml", 'bad_transport.toml:3: host "gpu1": key "transport": unknown transport "telnet"'),
        ("negative_count.toml", 'negative_count.toml:3: host "gpu1": emulate: key "count": -2 is out of range'),
        ("bad_speed.toml", 'bad_speed.toml:3: host "gpu1": emulate: key "speed": must be > 0, got 0'),
        ("unknown_emulate_key.toml", 'host "gpu1": emulate: unknown key "sped" (did you mean "speed"?)'),
        ("empty.toml", "empty.toml: the file is empty; add at least one [[hosts]] table"),
        ("no_hosts.toml", "no_hosts.toml: no hosts defined"),
        ("unknown_top.toml", 'unknown_top.toml: unknown key "host" (did you mean "hosts"?)'),
        ("syntax.toml", "syntax.toml:1: TOML syntax error"),
        ("latin1.toml", "latin1.toml:2: not valid UTF-8 (byte 0xe9"),
        ("bad_address.toml", 'bad_address.toml:3: host "gpu1": key "address": "-oProxyCommand=evil" is not'),
        ("bad_gpus.toml", 'bad_gpus.toml:3: host "gpu1": key "gpus": duplicate GPU index in [0, 0, 1]'),
    ],
)
def test_bad_file_names_file_line_host_and_key(name: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_hosts(DATA / name)
    assert str(info.value).startswith(expected) or expected in str(info.value), str(info.value)


@pytest.mark.parametrize("key", ["name", "user", "address", "gpu_type"])
def test_a_value_that_ends_in_a_newline_is_refused(key: str) -> None:
    """A regex "$" takes a final newline: `name = "loc\\n"` loaded, broke `hosts list` into two
    lines and the agent refused the host."""
    values = {"name": "loc", "user": "root", "address": "127.0.0.1", "gpu_type": "V100"}
    values[key] += "\n"
    text = "[[hosts]]\n" + "".join(f'{k} = "{v.encode("unicode_escape").decode()}"\n' for k, v in values.items())
    with pytest.raises(ConfigError, match=f'key "{key}"'):
        parse_hosts_text(text, "hosts.toml")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.toml: file not found") as info:
        load_hosts(tmp_path / "nope.toml")
    assert f"(looked for {tmp_path / 'nope.toml'})" in str(info.value), "the whole path: a typo may be in a folder"


def test_a_directory_names_its_whole_path(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a directory") as info:
        load_hosts(folder)
    assert f"{folder} is a directory" in str(info.value), "'conf: is a directory' did not say which conf"


def test_defaults_merge_into_every_host(tmp_path: Path) -> None:
    text = """
[defaults]
user = "alice"
port = 2222
jump = "login.example.org"
ssh_config = "ssh_config"
shared_fs = false

[[hosts]]
name = "a"

[[hosts]]
name = "b"
port = 22
user = "bob"
shared_fs = true
"""
    hosts = parse_hosts_text(text, tmp_path / "hosts.toml")
    a, b = hosts.hosts
    assert (a.user, a.port, a.jump, a.address, a.shared_fs) == ("alice", 2222, "login.example.org", "a", False)
    assert (b.user, b.port, b.shared_fs) == ("bob", 22, True)
    assert hosts.ssh_config == (tmp_path / "ssh_config").resolve()
    assert a.line == 9 and b.line == 12


def test_bundled_configs_are_valid_and_heterogeneous(repo: Path) -> None:
    local = load_hosts(bundled_config("local.toml"))
    assert all(h.transport == "local" for h in local.hosts)
    assert len({h.emulate.gpu_type for h in local.hosts if h.emulate}) >= 2
    example = load_hosts(repo / "configs" / "hosts.example.toml")
    assert len({h.rack for h in example.hosts}) >= 2
    assert any(h.jump for h in example.hosts)


def test_the_example_hosts_file_shows_every_key(repo: Path) -> None:
    """README says it does; ssh_config and transport were missing."""
    import re

    from heet_tui.config.hosts_file import DEFAULT_KEYS, EMULATE_KEYS, HOST_KEYS

    text = (repo / "configs" / "hosts.example.toml").read_text()
    written = set(re.findall(r"^#? ?(\w+) = ", text, re.M)) | set(re.findall(r"(\w+) = ", text.split("emulate = {")[1]))
    keys = HOST_KEYS | DEFAULT_KEYS | EMULATE_KEYS
    assert keys <= written, sorted(keys - written)


def test_hosts_path_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_hosts_path(None) == bundled_config("local.toml")
    user = tmp_path / "config" / "heet-tui" / "hosts.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[[hosts]]\nname = "u"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert resolve_hosts_path(None) == user
    monkeypatch.setenv("HEET_HOSTS", str(tmp_path / "env.toml"))
    assert resolve_hosts_path(None) == tmp_path / "env.toml"
    assert resolve_hosts_path(str(tmp_path / "cli.toml")) == tmp_path / "cli.toml"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ('emulate = { gpu_type = "V100", count = 0, speed = 0.5 }',
         'hosts.toml:3: host "v": emulate: key "count": 0 is out of range'),
        ('emulate = { gpu_type = "V100", count = 99999, speed = 0.5 }',
         'hosts.toml:3: host "v": emulate: key "count": 99999 is out of range (expected from 1 to 256)'),
        ('gpu_type = "A100"\nemulate = { gpu_type = "V100", count = 1, speed = 0.5 }',
         'hosts.toml:3: host "v": key "gpu_type": "A100" contradicts emulate\'s gpu_type "V100"'),
    ],
)
def test_an_emulated_host_that_can_run_nothing_or_names_two_types_is_refused(host: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_hosts_text(f'[[hosts]]\nname = "v"\n{host}\n', Path("hosts.toml"))
    assert str(info.value).startswith(expected), str(info.value)


def test_a_file_saved_with_a_byte_order_mark_reads_and_edits_as_without(tmp_path: Path) -> None:
    """Windows editors may write one; it was "TOML syntax error: Invalid statement (column 1)"."""
    from heet_tui.config.hosts_edit import HostsDocument
    from heet_tui.config.job_spec import load_job_file

    path = tmp_path / "hosts.toml"
    path.write_bytes(b'\xef\xbb\xbf# lab\n[[hosts]]\nname = "a"\nemulate = { gpu_type = "T4", count = 1 }\n')
    assert [h.name for h in load_hosts(path).hosts] == ["a"]
    doc = HostsDocument.load(path)
    doc.add_host({"name": "b", "emulate": {"gpu_type": "T4", "count": 2, "speed": 1.0}})
    doc.save()
    assert [h.name for h in load_hosts(path).hosts] == ["a", "b"] and path.read_text().startswith("# lab\n")
    job = tmp_path / "j.toml"
    job.write_bytes(b'\xef\xbb\xbfname = "j"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\n'
                    b"target = { steps = 5 }\n")
    assert [s.name for s in load_job_file(job)] == ["j"]


@pytest.mark.parametrize(("host", "expected"), [
    ('jump = "login:99999"', 'key "jump": port 99999 is out of range (expected from 1 to 65535)'),
    ('jump = "@:"', 'key "jump": "@:" names no host'),
    # the host form's word for a direct connection, written by hand: "cannot connect to root@none:22"
    ('jump = "none"', 'key "jump": "none" would be a jump host of that name; write jump = "" to connect directly'),
    ('gpus = [5]\nemulate = { gpu_type = "T4", count = 2 }', 'key "gpus": index 5 is not among the 2 emulated GPUs'),
    ('gpus = []', 'key "gpus": [] leaves heet no GPU on this host'),
    # each ran through hosts add and hosts list, and failed only at connect
    ('python = "/usr/bin/python3;id"', 'key "python": "/usr/bin/python3;id" is not a command name or path'),
    ('python = "-c"', 'key "python": "-c" is not a command name or path'),
    (r'rack = "r1\u001b]0;PWNED\u0007"', 'key "rack": '),  # hosts list printed it raw: a new window title
    # a host "spare" with address "spare-gpu" ran its jobs here, on the login node
    ('address = "spare-gpu"\nport = 22\ntransport = "local"', 'key "address": a local host runs on this machine, '
     'without SSH, and would not use address or port; remove transport = "local" to reach it over SSH'),
])
def test_what_only_hosts_check_caught_is_refused_when_the_file_is_read(host: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(f'hosts.toml:3: host "v": {expected}')):
        parse_hosts_text(f'[[hosts]]\nname = "v"\n{host}\n', Path("hosts.toml"))
    fine = parse_hosts_text('[[hosts]]\nname = "v"\njump = "u@[::1]:2222"\ngpus = [1]\n'
                            'emulate = { gpu_type = "T4", count = 2 }\n', Path("hosts.toml")).hosts[0]
    # [defaults] user, port and jump are for the ssh hosts: a local host beside them is fine, and jump = "" too
    local = parse_hosts_text('[defaults]\nuser = "me"\nport = 2222\njump = "bastion"\n[[hosts]]\nname = "here"\n'
                             'transport = "local"\njump = ""\n', Path("hosts.toml")).hosts[0]
    assert local.transport == "local"
    assert (fine.jump, fine.gpus) == ("u@[::1]:2222", (1,))


def test_a_workdir_the_login_shell_could_read_as_code_is_refused_with_its_line(tmp_path: Path) -> None:
    """fish reads \\' inside single quotes as a quote, so a workdir could end the quoting there."""
    text = '[[hosts]]\nname = "a"\nworkdir = "a\\\\\'$(touch PWNED)\\" #"\n'
    with pytest.raises(ConfigError) as info:
        parse_hosts_text(text, tmp_path / "hosts.toml")
    assert str(info.value).startswith("hosts.toml:3:") and "no backslash, !" in str(info.value), str(info.value)


def test_a_hosts_file_others_can_write_is_refused(tmp_path: Path) -> None:
    """Its hosts' python, workdir and SSH settings run as you: with a umask of 000, another user added
    python = "/tmp/evil.sh" and it ran as the controller's user at the next reload."""
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n')
    assert load_hosts(path).names() == ("a",)
    path.chmod(0o666)
    with pytest.raises(ConfigError, match=r"refused: every user can write it.*chmod go-w"):
        load_hosts(path)
    path.chmod(0o664)
    assert os.stat(path).st_gid != os.getgid() or load_hosts(path).names() == ("a",), "your own group: as ssh allows"
    path.chmod(0o644)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may swap the file for another
    moved = shared / "hosts.toml"
    moved.write_text(path.read_text())
    with pytest.raises(ConfigError, match="shared above it may be written by every user \\(and is not sticky\\)"):
        load_hosts(moved)


@pytest.mark.skipif(os.getuid() != 0, reason="making a link another user owns takes root")
def test_a_hosts_file_or_state_directory_through_another_users_link_is_refused(tmp_path: Path) -> None:
    """The link's owner may re-point it after the file it leads to was checked."""
    from heet_tui.control.store import Store, StoreError

    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n')
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "hl.toml").symlink_to(path)
    assert load_hosts(shared / "hl.toml").names() == ("a",), "your own (root's here) link"
    os.lchown(shared / "hl.toml", 1234, 1234)
    with pytest.raises(ConfigError, match=r"hl.toml on the way to it is a link uid 1234 .*made") as info:
        load_hosts(shared / "hl.toml")
    assert "chmod" not in str(info.value) and "a link of your own in its place" in str(info.value), \
        "chmod follows the link: the advice changed nothing"
    mine = tmp_path / "state"
    mine.mkdir(mode=0o700)
    (shared / "st").symlink_to(mine)
    os.lchown(shared / "st", 1234, 1234)
    with pytest.raises(StoreError, match=r"st on the way to it is a link uid 1234 .*made"):
        Store(shared / "st")
    assert not (mine / "state.sqlite3").exists()


def test_the_users_own_hosts_file_is_made_private_whatever_the_umask(tmp_path: Path, monkeypatch) -> None:
    from heet_tui.config.hosts_file import editable_hosts_path

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    old = os.umask(0)
    try:
        user, copied = editable_hosts_path(bundled_config("local.toml"))
    finally:
        os.umask(old)
    assert copied and oct(user.stat().st_mode & 0o777) == "0o600" and oct(user.parent.stat().st_mode & 0o777) == "0o700"
    assert load_hosts(user).names()


def test_names_and_keys_from_the_file_reach_the_terminal_escaped(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An escape sequence in a host name or key went raw into the error: it turned the line red,
    cleared the screen, or (OSC 52) could set the clipboard; a newline split the message."""
    from heet_tui.cli.main import main

    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "lo\\u001b[31mc"\n')
    assert main(["hosts", "--hosts", str(path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and 'host "lo\\x1b[31mc"' in err, err
    path.write_text('[[hosts]]\nname = "loc\\n"\n')
    assert main(["hosts", "--hosts", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'host "loc\\n"' in err, err


def test_two_entries_for_one_machines_real_gpus_must_split_them() -> None:
    """A copy-pasted entry (same address and port) counted the machine's GPUs twice: plans put
    two jobs on each GPU."""
    twice = ('[[hosts]]\nname = "spare-1"\naddress = "10.0.0.8"\nport = 2222\n\n'
             '[[hosts]]\nname = "gpu-v9"\naddress = "10.0.0.8"\nport = 2222\n')
    with pytest.raises(ConfigError, match=r'hosts.toml:6: host "gpu-v9" is the same machine as host "spare-1" '
                                          r"\(address 10.0.0.8, port 2222\), and both use its GPUs \(all\)"):
        parse_hosts_text(twice, Path("hosts.toml"))
    with pytest.raises(ConfigError, match=r"both use its GPUs \(\[1\]\)"):
        parse_hosts_text(twice.replace('port = 2222\n\n', 'port = 2222\ngpus = [0, 1]\n\n', 1) + "gpus = [1, 2]\n",
                         Path("hosts.toml"))
    split = twice.replace('port = 2222\n\n', 'port = 2222\ngpus = [0, 1]\n\n', 1) + "gpus = [2, 3]\n"
    assert [h.name for h in parse_hosts_text(split, Path("hosts.toml")).hosts] == ["spare-1", "gpu-v9"]
    other_port = twice.replace("port = 2222\n", "port = 2223\n", 1)
    assert len(parse_hosts_text(other_port, Path("hosts.toml")).hosts) == 2
    emulated = twice + 'emulate = { gpu_type = "T4", count = 1, speed = 0.5 }\n'
    assert len(parse_hosts_text(emulated, Path("hosts.toml")).hosts) == 2, "declared GPUs may share a box"


def test_a_host_name_longer_than_the_agent_takes_is_refused_with_its_line() -> None:
    long = "a" * 129
    with pytest.raises(ConfigError, match=re.escape('hosts.toml:2: host "' + long + '": key "name": 129 characters')):
        parse_hosts_text(f'[[hosts]]\nname = "{long}"\n', Path("hosts.toml"))
    assert parse_hosts_text(f'[[hosts]]\nname = "{long[:128]}"\n', Path("hosts.toml")).hosts[0].name == long[:128]


def test_python_in_defaults_is_checked_too_and_a_home_path_is_taken() -> None:
    with pytest.raises(ConfigError, match=re.escape('hosts.toml:2: [defaults]: key "python"')):
        parse_hosts_text('[defaults]\npython = "python3 -u"\n[[hosts]]\nname = "v"\n', Path("hosts.toml"))
    fine = parse_hosts_text('[defaults]\npython = "~/miniconda3/bin/python"\n[[hosts]]\nname = "v"\n',
                            Path("hosts.toml"))
    assert fine.hosts[0].python == "~/miniconda3/bin/python"


@pytest.mark.skipif(os.getuid() != 0, reason="a directory of another user needs root")
def test_a_hosts_file_in_another_users_directory_is_refused_for_reading_and_editing(tmp_path: Path) -> None:
    """Its owner could swap the file between the read and the check, or the temp file a save
    chmod-ed by name: a root-only file was made readable to them, and the hosts file replaced."""
    from heet_tui.config.hosts_edit import HostsDocument

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    path = theirs / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n')
    os.chown(theirs, 65534, 65534)
    for load in (load_hosts, HostsDocument.load):
        with pytest.raises(ConfigError, match=re.escape(f"refused: {theirs} above it belongs to nobody (uid 65534)")):
            load(path)
    os.chown(theirs, 0, 0)
    os.chown(path, 65534, 65534)  # the file itself theirs: chmod cannot fix that, as it advised
    with pytest.raises(ConfigError, match=re.escape("owned by nobody (uid 65534), not by you") + ".*copy it to a file of your own"):
        load_hosts(path)


@pytest.mark.parametrize(("line", "expected"), [
    ('jump = "@:x"', 'key "jump": "@:x" is not of the form [user@]host[:port]'),  # failed only at connect
    ('emulate = { gpu_type = "T4", count = 2, speed = 1e9 }', 'key "speed": 1e+09 is out of range'),
    ('emulate = { gpu_type = "T4", count = 2, speed = 1e-300 }', 'key "speed": 1e-300 is out of range'),
])
def test_values_the_connection_or_the_steps_cannot_use_are_refused_at_load(tmp_path: Path, line: str,
                                                                          expected: str) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(f'[[hosts]]\nname = "z"\n{line}\n')
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_hosts(path)


def test_a_group_writable_hosts_file_is_taken_only_when_the_group_is_the_users_alone(tmp_path, monkeypatch) -> None:
    """A shared primary group (users) let its members edit the hosts file, and the controller ran
    their python at its next reload: group write was allowed for any primary group."""
    import grp
    import os
    import pwd

    from heet_tui.config import file_safety
    from heet_tui.config.file_safety import group_of_yours_alone, others_can_write

    me, gid = pwd.getpwuid(os.getuid()), os.getgid()
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("")
    os.chown(hosts, -1, gid)
    hosts.chmod(0o664)
    colleague = pwd.struct_passwd(("colleague", "x", os.getuid() + 4242, gid, "", "/", "/bin/sh"))

    def users(group_name: str, members: list[str], everyone: list) -> None:
        """The user database as this test has it, whatever this machine's groups are."""
        monkeypatch.setattr(file_safety.grp, "getgrgid",
                            lambda g: grp.struct_group((group_name, "x", g, members)) if g == gid else grp.getgrgid(g))
        monkeypatch.setattr(file_safety.pwd, "getpwall", lambda: everyone)

    users(me.pw_name, [], [me])  # a user-private group, as with a umask of 002
    assert group_of_yours_alone(gid) and others_can_write(hosts) is None
    assert not group_of_yours_alone(gid + 4242), "not your primary group"
    users(me.pw_name, [], [me, colleague])  # another user's primary group too
    assert not group_of_yours_alone(gid) and others_can_write(hosts) == f"group {me.pw_name} can write it"
    users(me.pw_name, [me.pw_name, "colleague"], [me])  # a listed member
    assert not group_of_yours_alone(gid)
    users("users", [], [me])  # a shared group by name
    assert not group_of_yours_alone(gid) and others_can_write(hosts) == "group users can write it"


def test_a_workdir_with_a_shell_variable_is_refused_saying_what_is_expanded(tmp_path: Path) -> None:
    """"$HOME/hw" was taken, and made a directory named "$HOME" in the login directory."""
    with pytest.raises(ConfigError) as info:
        parse_hosts_text('[[hosts]]\nname = "a"\nworkdir = "$HOME/hw"\n', tmp_path / "hosts.toml")
    assert str(info.value).startswith("hosts.toml:3:") and "$" in str(info.value) and "~/ is your home" in \
        str(info.value), str(info.value)
    assert parse_hosts_text('[[hosts]]\nname = "a"\nworkdir = "~/hw"\n', tmp_path / "hosts.toml").hosts[0].workdir \
        == "~/hw"
