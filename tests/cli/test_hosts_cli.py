"""``heet-tui hosts list/add/remove`` through the real console entry point, as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from heet_tui.config.hosts_file import load_hosts


def heet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "heet_tui.cli.main", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def hosts(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    shutil.copy(repo / "configs" / "hosts.example.toml", path)
    return path


def test_list_json_reports_every_host(hosts: Path) -> None:
    out = heet("hosts", "list", "--hosts", str(hosts), "--json")
    assert out.returncode == 0, out.stderr
    # "no verb: list", with list's options too (they were usage errors)
    bare = heet("hosts", "--hosts", str(hosts), "--json")
    assert bare.returncode == 0 and json.loads(bare.stdout) == json.loads(out.stdout), bare.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == ["a100-1", "v100-1", "v100-2", "t4-1", "t4-2", "dev-box"]
    assert rows[1]["gpus"] == [0, 1, 2]
    assert rows[5]["emulate"] == {"gpu_type": "T4", "count": 2, "speed": 0.25}


def test_list_table_uses_heet_hosts_env(hosts: Path) -> None:
    out = heet("hosts", "list", env={"HEET_HOSTS": str(hosts)})
    assert out.returncode == 0, out.stderr
    assert "dev-box" in out.stdout and "emulated T4:2:0.25" in out.stdout
    lines = out.stdout.splitlines()  # tags too, as hosts add --help says (they were in --json only)
    assert lines[1].split()[5] == "TAGS" and lines[2].split()[:6] == ["a100-1", "ssh", "10.1.0.11", "-", "r1", "nvlink"]
    bare = heet("hosts", env={"HEET_HOSTS": str(hosts)})  # was "the following arguments are required: VERB"
    assert (bare.returncode, bare.stdout) == (0, out.stdout)
    # [defaults]' user is the ssh hosts': a local host showed it as its own
    hosts.write_text('[defaults]\nuser = "alice"\n[[hosts]]\nname = "here"\ntransport = "local"\n')
    row = heet("hosts", "list", "--hosts", str(hosts)).stdout.splitlines()[2].split()
    assert row[:4] == ["here", "local", "-", "-"], row


def test_add_then_remove_edits_the_file_in_place(hosts: Path) -> None:
    original = hosts.read_text()
    local = heet("--hosts", str(hosts), "hosts", "add", "here", "--transport", "local", "--address", "1.2.3.4")
    assert local.returncode == 2 and "--address: a local host runs on this machine" in local.stderr
    assert hosts.read_text() == original, "accepted, the address was never used"
    out = heet("--hosts", str(hosts), "hosts", "add", "gpu9", "--address", "10.9.0.9", "--port", "2200",
               "--rack", "r9", "--emulate", "V100:2:0.5")
    assert out.returncode == 0, out.stderr
    listed = json.loads(heet("hosts", "list", "--hosts", str(hosts), "--json").stdout)
    gpu9 = next(r for r in listed if r["name"] == "gpu9")
    assert gpu9["port"] == 2200 and gpu9["emulate"]["gpu_type"] == "V100"
    assert hosts.read_text().startswith(original)  # everything the user wrote is untouched
    out = heet("hosts", "remove", "gpu9", "--hosts", str(hosts))
    assert out.returncode == 0, out.stderr
    assert "gpu9" not in hosts.read_text()


def test_add_takes_every_key_a_host_entry_has(hosts: Path) -> None:
    """A host whose python or workdir differs from [defaults] had to be added, then edited by hand."""
    out = heet("--hosts", str(hosts), "hosts", "add", "odd", "--python", "/opt/py311/bin/python3", "--workdir",
               "/scratch/heet", "--jump", "", "--gpus", "0,2", "--tags", "nvlink, big", "--no-shared-fs")
    assert out.returncode == 0, out.stderr
    odd = load_hosts(hosts).host("odd")
    assert (odd.python, odd.workdir, odd.jump, odd.gpus, odd.tags, odd.shared_fs) == (
        "/opt/py311/bin/python3", "/scratch/heet", None, (0, 2), ("nvlink", "big"), False)
    out = heet("--hosts", str(hosts), "hosts", "add", "odd2", "--gpus", "0,x")
    assert out.returncode == 2 and '--gpus "0,x": expected GPU indices' in out.stderr


def test_add_without_an_address_connects_by_name(hosts: Path) -> None:
    # As in the TUI's form: the name is the address, so an ~/.ssh/config alias is enough.
    out = heet("--hosts", str(hosts), "hosts", "add", "gpu-alias")
    assert out.returncode == 0, out.stderr
    listed = json.loads(heet("hosts", "list", "--hosts", str(hosts), "--json").stdout)
    assert next(r for r in listed if r["name"] == "gpu-alias")["address"] == "gpu-alias"
    assert 'address = "gpu-alias"' not in hosts.read_text()  # nothing written that the user did not say


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["hosts", "add", "t4-1", "--address", "x"], 'a host named "t4-1" already exists'),
        (["hosts", "add", "z", "--address", "x", "--port", "0"], 'key "port": 0 is out of range'),
        (["hosts", "add", "z", "--address", "x", "--emulate", "T4:four:1"], "COUNT must be an integer"),
        (["hosts", "remove", "ghost"], 'no host named "ghost"'),
    ],
)
def test_bad_edits_exit_2_with_a_message_and_leave_the_file(hosts: Path, args: list[str], message: str) -> None:
    before = hosts.read_bytes()
    out = heet(*args, "--hosts", str(hosts))
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert hosts.read_bytes() == before


def test_broken_hosts_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "hosts.toml"
    bad.write_text('[[hosts]]\nname = "gpu3"\ngpu = [0]\n')
    out = heet("hosts", "list", "--hosts", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip() == 'heet-tui: hosts.toml:3: host "gpu3": unknown key "gpu" (did you mean "gpus"?)'


def test_version() -> None:
    out = heet("--version")
    assert out.returncode == 0 and out.stdout.startswith("heet-tui ")
    # builds 300 commits apart all said "heet-tui 0.1.0": the agent bundle's hash tells them apart
    from heet_tui.cluster.agent_bundle import agent_bundle

    assert out.stdout.strip().endswith(f"(agent bundle {agent_bundle().digest[:8]})"), out.stdout


def test_a_reader_that_goes_away_gets_no_traceback(hosts: Path) -> None:
    """``heet-tui hosts list --json | head -c 1``: the pipe closes before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "hosts", "list", "--hosts", str(hosts),
                               "--json"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr, done.stderr
    # the reader's choice, not a failure: it was 1 here and 0 where the output fit the pipe (pipefail)
    assert done.returncode == 0


def test_the_first_edit_of_the_bundled_config_makes_the_users_own_copy() -> None:
    # A fresh machine runs on the bundled configs/local.toml, which lives inside the package.
    from heet_tui.config.hosts_file import bundled_config

    bundled = bundled_config("local.toml")
    before = bundled.read_text()
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "heet-tui" / "hosts.toml"
    bad = heet("hosts", "add", "local-t4", "--transport", "local")
    assert bad.returncode == 2 and 'a host named "local-t4" already exists' in bad.stderr, bad.stderr
    assert not user.exists(), "a refused edit makes no copy that heet-tui would use from then on"
    out = heet("hosts", "add", "gpu9", "--emulate", "V100:2:0.5", "--transport", "local")
    assert out.returncode == 0, out.stderr
    assert f"created {user} from the bundled local.toml" in out.stdout
    assert bundled.read_text() == before, "the package's file is never edited"
    text = user.read_text()
    assert "# heet-tui on this machine alone" in text, "comments come along"
    names = [r["name"] for r in json.loads(heet("hosts", "list", "--json").stdout)]
    assert names == ["local-a100", "local-t4", "gpu9"], "later runs find the user's file first"
    assert heet("hosts", "remove", "gpu9").returncode == 0 and "gpu9" not in user.read_text()
    refused = heet("--hosts", str(bundled), "hosts", "add", "gpu10")
    assert refused.returncode == 2 and f"your hosts file is {user}" in refused.stderr
    assert bundled.read_text() == before


def test_drain_and_undrain_write_the_state_stores_set(hosts: Path, tmp_path: Path) -> None:
    """The set the TUI's d key writes, for a headless controller (heet-tui run) to follow."""
    state = ["--state", str(tmp_path / "state")]
    out = heet("hosts", "drain", "t4-9", "--hosts", str(hosts), *state)
    assert out.returncode == 2 and 'no host named "t4-9" (hosts: a100-1, v100-1' in out.stderr
    assert heet("hosts", "drain", "t4-1", "--hosts", str(hosts), *state).stdout.strip() == (
        "t4-1 drained: its jobs move at the next plan, or stop where no other host can hold them")
    assert heet("hosts", "drain", "t4-2", "--hosts", str(hosts), *state).returncode == 0
    from heet_tui.control.store import Store

    assert json.loads(Store(tmp_path / "state").setting("drained")) == ["t4-1", "t4-2"]
    assert heet("hosts", "undrain", "t4-1", *state).stdout.strip() == "t4-1 back in service"
    assert heet("hosts", "undrain", "t4-1", "--hosts", str(hosts), *state).stdout.strip() == (
        "t4-1 is not drained (drained: t4-2)")
    assert json.loads(Store(tmp_path / "state").setting("drained")) == ["t4-2"]
    typo = heet("hosts", "undrain", "t4-l", "--hosts", str(hosts), *state)  # it said "not drained", exit 0
    assert typo.returncode == 2 and 'no drained host named "t4-l"' in typo.stderr
    # a pattern of hosts in service: nothing to do, as for one name (a nightly `undrain 'a100-*'` exited 2)
    idle = heet("hosts", "undrain", "a100-*", "--hosts", str(hosts), *state)
    assert idle.returncode == 0 and "heet-tui: a100-*: none of its hosts is drained" in idle.stderr, idle.stderr
    # one host in service beside a drained one: the drained one goes back, the other is said (it was exit 2)
    assert heet("hosts", "drain", "t4-1", "--hosts", str(hosts), *state).returncode == 0
    mixed = heet("hosts", "undrain", "a100-1", "t4-1", "--hosts", str(hosts), *state)
    assert mixed.returncode == 0 and "heet-tui: a100-1: not drained" in mixed.stderr, mixed.stderr
    assert "t4-1 back in service" in mixed.stdout
    assert heet("hosts", "undrain", "zz-*", "--hosts", str(hosts), *state).returncode == 2, "a pattern of nothing"
    # --hosts wins over the file the store's controller last ran on (it was ignored)
    other = tmp_path / "other.toml"
    other.write_text('[[hosts]]\nname = "elsewhere"\ntransport = "local"\n')
    Store(tmp_path / "state").set_setting("hosts_path", str(other))
    assert heet("hosts", "drain", "a100-1", "--hosts", str(hosts), *state).returncode == 0
