"""A checkpoint save that fails part-way (a full disk) leaves the last good checkpoint whole and
takes its partial copy with it, so the disk is not kept full for the next save."""

from __future__ import annotations

import pytest
from heet_agent.atomic_file import atomic_write


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial_copy(tmp_path) -> None:
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"the last good checkpoint")

    def fills_the_disk(fh) -> None:
        fh.write(b"x" * 65536)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        atomic_write(str(target), fills_the_disk)
    assert target.read_bytes() == b"the last good checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]
    atomic_write(str(target), lambda fh: fh.write(b"a newer one"))
    assert target.read_bytes() == b"a newer one"


def test_checkpoints_and_the_agents_files_are_private_under_any_umask(tmp_path) -> None:
    """Model weights took the umask: 0644, readable by every user of the host, in a checkpoint_dir
    that was not itself private."""
    import os

    from heet_agent.elastic_checkpoint import save_owned

    old = os.umask(0o022)
    try:
        directory = tmp_path / "ckpt" / "job"
        assert save_owned(str(directory), 1, lambda fh: fh.write(b"weights"), {"step": 3})
    finally:
        os.umask(old)
    assert directory.stat().st_mode & 0o777 == 0o700
    files = sorted(directory.iterdir())
    assert files and all(p.stat().st_mode & 0o777 == 0o600 for p in files), \
        {p.name: oct(p.stat().st_mode & 0o777) for p in files}
