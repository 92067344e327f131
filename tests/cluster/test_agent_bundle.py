"""The zipapp unpacks itself once, and later starts run the unpacked copy with cached bytecode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

from heet_tui.cluster.agent_bundle import agent_bundle

HELLO = b'{"id": 1, "op": "hello", "args": {"protocol": 1, "probes": []}}\n'


def _hello(workdir, script):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as over SSH
    out = subprocess.run([sys.executable, script, "--workdir", ".", "--host", "h1"], cwd=workdir, input=HELLO,
                         env=env, capture_output=True, timeout=60, check=True).stdout
    replies = [json.loads(line) for line in out.splitlines()]
    return next(r for r in replies if r.get("id") == 1)


def test_first_start_unpacks_and_the_unpacked_entry_serves(tmp_path):
    bundle = agent_bundle()
    (tmp_path / bundle.file_name).write_bytes(bundle.data)
    assert _hello(tmp_path, bundle.file_name)["ok"]
    unpacked = tmp_path / bundle.unpacked_entry
    assert unpacked.is_file()
    with zipfile.ZipFile(tmp_path / bundle.file_name) as zf:
        packed = sorted(zf.namelist())
    assert sorted(str(p.relative_to(unpacked.parent)) for p in unpacked.parent.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts) == packed
    assert (unpacked.parent / "heet_agent" / "main.py").is_file()
    assert not list(tmp_path.glob("*.tmp.*"))
    (tmp_path / bundle.file_name).unlink()  # the second start must not need the zip
    assert _hello(tmp_path, bundle.unpacked_entry)["ok"]
    assert list((unpacked.parent / "heet_agent" / "__pycache__").glob("main.*.pyc"))


def test_a_python_too_old_for_the_agent_is_named_before_anything_else_runs(tmp_path):
    """Python 2 or 3.7 as a host's ``python`` failed with a SyntaxError from inside the agent."""
    bundle = agent_bundle()
    pyz = tmp_path / bundle.file_name
    pyz.write_bytes(bundle.data)
    as_37 = ("import runpy, sys; sys.version_info = (3, 7, 9, 'final', 0); sys.argv = [sys.argv[1]]; "
             "runpy.run_path(sys.argv[0], run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", as_37, str(pyz)], cwd=tmp_path, input=HELLO,
                         capture_output=True, timeout=60)
    assert run.returncode == 2 and run.stdout == b""
    assert b"the agent needs Python 3.8 or newer" in run.stderr and sys.executable.encode() in run.stderr
    assert not (tmp_path / bundle.unpacked_entry).exists()  # it stopped before unpacking


def test_the_agent_is_python_3_8_and_the_standard_library_only() -> None:
    """It runs on each host's own python, often a distribution's old one with nothing
    installed: a newer syntax or a third-party import there is a host that never comes up.
    nvidia-ml-py and torch are optional and imported where used, behind a fallback."""
    import ast
    from pathlib import Path

    optional = {"heet_agent", "pynvml", "torch"}
    for path in sorted((Path(__file__).resolve().parents[2] / "remote").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in optional, f"{path.name}:{node.lineno} imports {name}"
