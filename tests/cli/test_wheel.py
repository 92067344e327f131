"""A non-editable install from a built wheel can find the agent and the bundled configs."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_locates_agent_files(repo: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(repo)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(dist.glob("heet_tui-*.whl"))
    env_dir = tmp_path / "venv"
    # system_site_packages: the runtime dependencies come from the test venv; the wheel itself
    # is installed for real (no editable path hooks), which is what this test is about.
    venv.EnvBuilder(with_pip=True, system_site_packages=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    probe = (
        "import importlib.resources as r, heet_agent, heet_tui.config.hosts_file as h\n"
        "files = sorted(p.name for p in r.files('heet_agent').iterdir() if p.name.endswith(('.py', '.md')))\n"
        "print(heet_agent.__file__); print(','.join(files))\n"
        "print(h.bundled_config('local.toml').read_text().count('[[hosts]]'))\n"
        "print(h.bundled_config('sim/sia-64gpu.toml').exists())\n"
        "demo = r.files('heet_tui').joinpath('data', 'profiles', 'cifar10')\n"
        "print(sorted(p.name.split('-')[0] for p in demo.iterdir() if p.name.endswith('.csv')) and 'csv')\n"
        "print(len([p for p in demo.iterdir() if p.name.startswith('validation-')]))\n"
    )
    out = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    agent_file, files, local_hosts, sim_config, demo_csv, validation = out.stdout.split("\n")[:6]
    assert str(env_dir) in agent_file and str(repo) not in agent_file  # really the installed copy
    assert "progress.py" in files.split(",")
    assert int(local_hosts) >= 1
    assert sim_config == "True"
    assert demo_csv == "csv" and int(validation) >= 1  # the demo's profile subset ships too
