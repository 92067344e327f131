"""A local host with no GPU emulation whose ``nvidia-smi`` is a recorded answer (two A100s):
what the agent reads on a real GPU host, with no GPU here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

RECORDING = Path(__file__).resolve().parents[1] / "cluster" / "data" / "nvidia-smi-a100.csv"
SECOND_GPU = "GPU-9b0f4a7e-2d61-4c3b-8e55-71c9d0e3a222"  # in the recording


def recorded_gpu_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prelude: str = "") -> tuple[Path, Path]:
    """The hosts file of host "box", and the file its ``nvidia-smi --query-compute-apps``
    prints (empty until a test writes it); ``prelude``: shell run first on every call."""
    bin_dir, apps = tmp_path / "bin", tmp_path / "compute-apps.csv"
    bin_dir.mkdir()
    apps.write_text("")
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\n{prelude}\ncase "$1" in --query-compute-apps*) cat {apps} ;; '
                   f'*) cat {RECORDING} ;; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[defaults]\npython = "{sys.executable}"\n\n[[hosts]]\nname = "box"\ntransport = "local"\n'
                     f'workdir = "{tmp_path / "w-box"}"\n')
    return hosts, apps
