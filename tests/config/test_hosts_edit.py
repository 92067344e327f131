"""Editing the host list keeps the user's file: comments, layout and untouched bytes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from heet_tui.config.errors import ConcurrentModification, ConfigError
from heet_tui.config.hosts_edit import HostsDocument
from heet_tui.config.hosts_file import load_hosts, parse_hosts_text


@pytest.fixture
def example(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    shutil.copy(repo / "configs" / "hosts.example.toml", path)
    return path


def test_untouched_document_round_trips_byte_identical(example: Path) -> None:
    original = example.read_bytes()
    doc = HostsDocument.load(example)
    assert doc.text().encode() == original
    doc.save()
    assert example.read_bytes() == original


def test_add_update_remove_keep_comments_and_untouched_hosts(example: Path) -> None:
    original = example.read_text()
    doc = HostsDocument.load(example)
    doc.add_host({"name": "new-1", "address": "10.3.0.1", "rack": "r3",
                  "emulate": {"gpu_type": "A100", "count": 2, "speed": 1.0}})
    doc.update_host("t4-1", {"rack": "r9"})
    doc.remove_host("v100-2")
    doc.save()
    text = example.read_text()
    # every comment line of the original survives
    for line in original.splitlines():
        if line.strip().startswith("#"):
            assert line in text
    # the untouched a100-1 block is byte-identical
    block = original[original.index('[[hosts]]\nname = "a100-1"'):original.index('[[hosts]]\nname = "v100-1"')]
    assert block in text
    assert 'gpu_type = "T4"                # NVML says "Tesla T4"; name it as the profiles do' in text
    hosts = load_hosts(example)
    assert "v100-2" not in hosts.names()
    assert hosts.host("t4-1").rack == "r9"
    new = hosts.host("new-1")
    assert new.emulate is not None and new.emulate.count == 2 and new.rack == "r3"
    assert 'emulate = { gpu_type = "A100", count = 2, speed = 1.0 }\n' in text, "written as people write it"
    assert (example.with_name("hosts.toml.bak")).read_text() == original


def test_invalid_edit_is_refused_and_leaves_the_document_unchanged(example: Path) -> None:
    doc = HostsDocument.load(example)
    before = doc.text()
    with pytest.raises(ConfigError, match='key "port": 0 is out of range'):
        doc.update_host("t4-1", {"port": 0})
    with pytest.raises(ConfigError, match='a host named "t4-1" already exists'):
        doc.add_host({"name": "t4-1", "address": "x"})
    with pytest.raises(ConfigError, match='unknown key "gpu" \\(did you mean "gpus"\\?\\)'):
        doc.add_host({"name": "z", "gpu": [0]})
    with pytest.raises(ConfigError, match='no host named "ghost"'):
        doc.remove_host("ghost")
    with pytest.raises(ConfigError) as bad:  # the line it named was one the file would have had
        doc.add_host({"name": "z", "emulate": {"gpu_type": "T4", "count": -2, "speed": 1.0}})
    assert str(bad.value) == (f'{example.name}: host "z": emulate: key "count": -2 is out of range (expected from 1 '
                              "to 256); nothing was added")
    assert doc.text() == before


def test_save_refuses_when_the_file_changed_on_disk(example: Path) -> None:
    doc = HostsDocument.load(example)
    doc.update_host("t4-1", {"rack": "r7"})
    someone_else = example.read_text() + "\n# edited by hand meanwhile\n"
    example.write_text(someone_else)
    with pytest.raises(ConcurrentModification, match="changed on disk since it was loaded"):
        doc.save()
    assert example.read_text() == someone_else  # their edit is not lost


def test_save_is_atomic_and_keeps_permissions(example: Path) -> None:
    os.chmod(example, 0o600)
    doc = HostsDocument.load(example)
    doc.update_host("t4-1", {"rack": "r5"})
    doc.save()
    assert example.stat().st_mode & 0o777 == 0o600
    assert not [p for p in example.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_directory_that_cannot_be_written_is_said_not_a_traceback(example: Path, monkeypatch, capsys) -> None:
    """`hosts add` on a file in a directory the user may not write ended in a PermissionError
    traceback (the save writes a new file beside it). Root may write anywhere: the refusal the
    system gives an ordinary user is played here."""
    import tempfile

    from heet_tui.cli.main import main

    before = example.read_text()

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(example.parent / ".hosts.toml.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert main(["hosts", "add", "x1", "--hosts", str(example), "--transport", "local", "--emulate", "T4:1:0.25"]) == 2
    err = capsys.readouterr().err
    assert f"cannot save: {example.parent} cannot be written (Permission denied)" in err and "nothing was saved" in err
    assert "Traceback" not in err and example.read_text() == before


@pytest.mark.parametrize("name", ["a100-1", "v100-2", "dev-box"])
def test_removing_any_host_keeps_every_comment_about_the_others(example: Path, name: str) -> None:
    original = example.read_text()
    doc = HostsDocument.load(example)
    doc.remove_host(name)
    doc.save()
    text = example.read_text()
    own_block = original[original.index(f'name = "{name}"'):]
    own_comments = {ln for ln in own_block.split("[[hosts]]")[0].splitlines() if "#" in ln}
    for line in original.splitlines():
        if line.strip().startswith("#") and line not in own_comments:
            assert line in text, line
    assert name not in load_hosts(example).names()
    assert len(load_hosts(example).hosts) == 5


HEADED = """# Lab hosts
[[hosts]]
name = "a"   # primary
address = "10.0.0.1"

# The T4 box; flaky fan
# (ask Bob before rebooting)
[[hosts]]
name = "b"
address = "10.0.0.2"

# --- rack r2 ---

# Newest: V100
[[hosts]]
name = "c"
address = "10.0.0.3"
"""


@pytest.mark.parametrize(("name", "cut"), [
    ("a", ('[[hosts]]\nname = "a"   # primary\naddress = "10.0.0.1"\n',)),
    ("b", ('# The T4 box; flaky fan\n# (ask Bob before rebooting)\n[[hosts]]\nname = "b"\naddress = "10.0.0.2"\n\n',)),
    ("c", ('\n# Newest: V100\n[[hosts]]\nname = "c"\naddress = "10.0.0.3"\n',)),
])
def test_the_comment_right_above_a_host_goes_with_it(tmp_path: Path, name: str, cut: tuple[str]) -> None:
    """It described that host; left behind, it sat above the next one ("flaky fan" on the V100).
    A comment atop the file, or one set apart by a blank line (a section), stays."""
    path = tmp_path / "hosts.toml"
    path.write_text(HEADED)
    doc = HostsDocument.load(path)
    doc.remove_host(name)
    doc.save()
    assert path.read_text() == HEADED.replace(cut[0], "", 1)


def test_a_file_with_windows_line_ends_keeps_them_through_an_edit(tmp_path: Path) -> None:
    """An added host's lines came with "\\n" into a "\\r\\n" file: mixed line ends."""
    path = tmp_path / "hosts.toml"
    path.write_bytes(b'# lab\r\n[[hosts]]\r\nname = "a"\r\naddress = "10.0.0.1"\r\n')
    doc = HostsDocument.load(path)
    doc.add_host({"name": "b", "address": "10.0.0.2"})
    doc.save()
    data = path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"") and data.startswith(b'# lab\r\n[[hosts]]\r\nname = "a"\r\n')
    doc.update_host("b", {"rack": "r2"})
    doc.save()  # what it wrote is what it compares with next time: no "changed on disk"
    assert [h.name for h in HostsDocument.load(path).validated.hosts] == ["a", "b"]


def test_the_backup_replaces_a_link_planted_at_its_name_and_never_writes_through_it(example: Path) -> None:
    victim = example.parent / "victim"
    victim.write_text("untouched")
    victim.chmod(0o600)
    example.with_name("hosts.toml.bak").symlink_to(victim)
    original = example.read_text()
    doc = HostsDocument.load(example)
    doc.remove_host("v100-2")
    doc.save()
    backup = example.with_name("hosts.toml.bak")
    assert not backup.is_symlink() and backup.read_text() == original
    assert victim.read_text() == "untouched" and victim.stat().st_mode & 0o777 == 0o600


BANNERS = """[defaults]
workdir = "/tmp/w"

# --- fast box ---
[[hosts]]
name = "a"
transport = "local"
emulate = { gpu_type = "A100", count = 1, speed = 1.0 }

# --- slow box: T4s, bought 2019 ---
[[hosts]]
name = "b"
transport = "local"
emulate = { gpu_type = "T4", count = 1, speed = 0.25 }

# --- c: keep this note about c ---
[[hosts]]
name = "c"
transport = "local"
emulate = { gpu_type = "T4", count = 1, speed = 0.25 }
# the end of the file
"""


def test_a_new_key_goes_under_its_own_host_not_the_next_ones_banner(tmp_path: Path) -> None:
    """Seen: tags added to "a" were written below "# --- slow box ---", the comment above "b";
    removing "b" then took "# --- c: ..." and the keys around it along."""
    path = tmp_path / "hosts.toml"
    path.write_text(BANNERS)
    for edit in (lambda d: d.update_host("a", {"tags": ["x"]}), lambda d: d.update_host("b", {"rack": "r2"}),
                 lambda d: d.update_host("c", {"rack": "r3"}), lambda d: d.remove_host("b")):
        doc = HostsDocument.load(path)
        edit(doc)
        doc.save()
    text = path.read_text()
    assert 'speed = 1.0 }\ntags = ["x"]\n\n# --- c: keep this note about c ---\n[[hosts]]\nname = "c"' in text, text
    assert 'speed = 0.25 }\nrack = "r3"\n# the end of the file\n' in text, text
    assert "slow box" not in text and 'name = "b"' not in text
    assert [h.name for h in load_hosts(path).hosts] == ["a", "c"]


def test_removing_the_only_host_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """It said only "hosts.toml: no hosts defined; add at least one [[hosts]] table", as if the
    file were broken rather than the removal refused."""
    path = tmp_path / "hosts.toml"
    original = '# my one box\n[[hosts]]\nname = "solo"\ntransport = "local"\n'
    path.write_text(original)
    doc = HostsDocument.load(path)
    with pytest.raises(ConfigError, match='cannot remove host "solo": it is the only one.*add the host that replaces'):
        doc.remove_host("solo")
    assert path.read_text() == original


def test_a_linked_hosts_file_is_written_through_the_link(tmp_path: Path) -> None:
    """Saving replaced the link with a file of its own: the linked copy (in a repository) missed the edit."""
    real = tmp_path / "repo" / "hosts.toml"
    real.parent.mkdir()
    real.write_text('[[hosts]]\nname = "a"\ntransport = "local"\n')
    link = tmp_path / "hosts.toml"
    link.symlink_to(real)
    doc = HostsDocument.load(link)
    doc.add_host({"name": "b", "transport": "local"})
    doc.save()
    assert link.is_symlink() and 'name = "b"' in real.read_text()
    assert (tmp_path / "repo" / "hosts.toml.bak").exists()


def test_an_edit_of_an_emulate_sub_table_keeps_it_and_its_comments(tmp_path: Path) -> None:
    """The form's emulate edit rewrote a [hosts.emulate] table as an inline one: its four comments,
    the blank line and the comment after it were gone."""
    path = tmp_path / "hosts.toml"
    original = ('[[hosts]]\nname = "gpu-t2"   # the t2 box\ntransport = "local"\n[hosts.emulate]   # declared\n'
                'gpu_type = "T4"   # kind\ncount = 2         # how many\nspeed = 0.25      # slow\n\n'
                '# (end of file -- spare-1 is not yet in service)\n')
    path.write_text(original)
    doc = HostsDocument.load(path)
    with pytest.raises(ConfigError):
        doc.update_host("gpu-t2", {"emulate": {"gpu_type": "T4", "count": 0, "speed": 0.3}})
    assert doc.text() == original, "a refused edit changes nothing"
    doc.update_host("gpu-t2", {"emulate": {"gpu_type": "T4", "count": 2, "speed": 0.3}})
    doc.save()
    assert path.read_text() == original.replace("speed = 0.25      # slow", "speed = 0.3      # slow")
    assert load_hosts(path).host("gpu-t2").emulate.speed == 0.3


def test_a_multi_line_array_keeps_its_layout_and_comments_through_an_edit(tmp_path: Path) -> None:
    """Adding a tag from the form flattened the list onto one line and lost the comments beside it."""
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ntags = [\n    "nvlink",     # fast interconnect\n    "big-mem",\n]\n'
                    "gpus = [0, 1, 2]  # 3 is broken\n")
    doc = HostsDocument.load(path)
    doc.update_host("a", {"tags": ["nvlink", "big-mem", "fast-disk"], "gpus": [0, 2]})
    assert doc.text() == ('[[hosts]]\nname = "a"\ntags = [\n    "nvlink",     # fast interconnect\n    "big-mem",\n'
                          '    "fast-disk",\n]\ngpus = [0, 2]  # 3 is broken\n')
    doc.update_host("a", {"tags": ["fast-disk", "nvlink"]})  # a new order: written as given
    assert parse_hosts_text(doc.text(), path).host("a").tags == ("fast-disk", "nvlink")
    with pytest.raises(ConfigError):  # an invalid edit leaves the array as it was
        doc.update_host("a", {"tags": ["x"], "gpus": [-1]})
    assert parse_hosts_text(doc.text(), path).host("a").tags == ("fast-disk", "nvlink")


def test_saving_an_unchanged_document_writes_nothing_and_keeps_the_backup(example: Path) -> None:
    """Ctrl+S on an unchanged form rewrote the file, and the .bak of the last real edit, the only
    way back, became a copy of the current file."""
    doc = HostsDocument.load(example)
    doc.update_host("t4-1", {"rack": "r5"})
    doc.save()
    backup = example.with_name(example.name + ".bak")
    undo, inode = backup.read_text(), example.stat().st_ino
    doc = HostsDocument.load(example)
    doc.update_host("t4-1", {"rack": "r5"})  # the form's value, unchanged
    doc.save()
    assert backup.read_text() == undo and example.stat().st_ino == inode


def test_a_save_into_a_directory_opened_to_others_since_the_load_is_refused(example: Path) -> None:
    """The TUI's Hosts screen loaded the file, the directory became group- or world-writable, and
    its add and remove still saved there (the CLI and the controller refused the same file)."""
    doc = HostsDocument.load(example)
    doc.update_host("t4-1", {"rack": "r5"})
    before = example.read_text()
    example.parent.chmod(0o777)
    try:
        with pytest.raises(ConfigError, match="may be written by every user.*nothing was saved"):
            doc.save()
    finally:
        example.parent.chmod(0o755)
    assert example.read_text() == before and not example.with_name(example.name + ".bak").exists()
