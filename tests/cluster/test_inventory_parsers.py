"""GPU inventory parsers on recorded outputs (nvidia-smi CSV, NVML answers), and type names.

The CSV files follow the format nvidia-smi 535 prints for
``--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits``
(values as reported on an A100 DGX, and a mixed T4 / 2080 Ti box where some fields are unsupported).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from heet_agent.inventory import emulated_gpus, gpus_from_nvml, parse_nvidia_smi_csv, probe_gpus

from heet_tui.cluster.gpu_names import short_gpu_type

DATA = Path(__file__).parent / "data"


def test_nvidia_smi_csv_a100():
    gpus = parse_nvidia_smi_csv((DATA / "nvidia-smi-a100.csv").read_text())
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[1]["memory_mb"] == 40960 and gpus[1]["memory_used_mb"] == 31245
    assert gpus[1]["utilization"] == 97.0
    assert gpus[0]["uuid"].startswith("GPU-5e1d")


def test_nvidia_smi_csv_unsupported_fields_and_warning_lines():
    gpus = parse_nvidia_smi_csv((DATA / "nvidia-smi-mixed.csv").read_text())
    assert [g["name"] for g in gpus] == ["Tesla T4", "NVIDIA GeForce RTX 2080 Ti"]
    assert gpus[0]["memory_used_mb"] is None and gpus[0]["utilization"] is None
    assert gpus[1]["utilization"] == 45.0


class NVMLError(Exception):
    pass


def _recorded_nvml(devices):
    """An object answering the pynvml calls the agent makes, from recorded values.

    A value of ``NVMLError`` stands for the query raising NVML_ERROR_NOT_SUPPORTED.
    """

    def answer(field):
        def call(handle):
            value = devices[handle][field]
            if value is NVMLError:
                raise NVMLError("Not Supported")
            return value

        return call

    calls = {"nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
             "nvmlDeviceGetCount": lambda: len(devices), "nvmlDeviceGetHandleByIndex": lambda i: i}
    for name, field in (("nvmlDeviceGetMemoryInfo", "memory"), ("nvmlDeviceGetUtilizationRates", "util"),
                        ("nvmlDeviceGetComputeRunningProcesses", "procs"), ("nvmlDeviceGetUUID", "uuid"),
                        ("nvmlDeviceGetName", "name")):
        calls[name] = answer(field)
    return SimpleNamespace(**calls)


def test_nvml_with_unsupported_queries_gives_none_not_a_crash():
    mib = 1024 * 1024
    nvml = _recorded_nvml([
        {"memory": SimpleNamespace(total=16 * 1024 * mib, used=512 * mib), "util": SimpleNamespace(gpu=12),
         "procs": [SimpleNamespace(pid=4242)], "uuid": b"GPU-aaaa", "name": b"Tesla V100-SXM2-16GB"},
        {"memory": SimpleNamespace(total=11264 * mib, used=0), "util": NVMLError, "procs": NVMLError,
         "uuid": "GPU-bbbb", "name": "NVIDIA GeForce RTX 2080 Ti"},
    ])
    gpus = gpus_from_nvml(nvml)
    assert gpus[0] == {"index": 0, "uuid": "GPU-aaaa", "name": "Tesla V100-SXM2-16GB", "memory_mb": 16384,
                       "memory_used_mb": 512, "utilization": 12.0, "processes": [4242]}
    assert gpus[1]["utilization"] is None and gpus[1]["processes"] is None
    assert gpus[1]["memory_mb"] == 11264


def test_probe_falls_back_to_emulated_then_none():
    source, gpus, notes = probe_gpus({"gpu_type": "T4", "count": 3, "speed": 0.5}, probes=("nvidia-smi-missing",))
    assert source == "emulated" and [g["name"] for g in gpus] == ["T4"] * 3
    assert probe_gpus(None, probes=())[:2] == ("none", [])
    assert emulated_gpus({"gpu_type": "A100", "count": 0, "speed": 1.0}) == []


def test_short_gpu_type_names():
    assert short_gpu_type("Tesla T4") == "T4"
    assert short_gpu_type("NVIDIA A100-SXM4-40GB") == "A100"
    assert short_gpu_type("NVIDIA GeForce RTX 2080 Ti") == "RTX2080Ti"
    assert short_gpu_type("Tesla V100-SXM2-16GB") == "V100"
    assert short_gpu_type("NVIDIA H100 80GB HBM3") == "H100"


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has NVIDIA GPUs")
def test_real_probes_on_a_machine_without_gpus_fall_back_to_emulation_with_reasons():
    source, gpus, notes = probe_gpus({"gpu_type": "T4", "count": 1, "speed": 1.0})
    assert source == "emulated" and len(gpus) == 1
    assert [note.split(":")[0] for note in notes] == ["nvml", "nvidia-smi"]  # why each real source failed


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU on this machine")
def test_real_probe_reads_every_gpu_through_nvml_as_nvidia_smi_lists_them():
    import subprocess

    listed = subprocess.run(["nvidia-smi", "--query-gpu=uuid,name", "--format=csv,noheader"],
                            capture_output=True, text=True, check=True).stdout
    expected = [tuple(part.strip() for part in line.split(",", 1)) for line in listed.splitlines() if line.strip()]
    source, gpus, notes = probe_gpus(None)
    assert source == "nvml", notes
    assert [(g["uuid"], g["name"]) for g in gpus] == expected
    assert all(g["memory_mb"] > 0 and g["memory_used_mb"] is not None for g in gpus)


def _recorded_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recording: str) -> None:
    """An ``nvidia-smi`` on PATH that prints a recorded answer (two A100s)."""
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\ncat {DATA / recording}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_declared_emulation_wins_over_real_gpus_and_says_which_it_left_unused(tmp_path, monkeypatch):
    _recorded_nvidia_smi(tmp_path, monkeypatch, "nvidia-smi-a100.csv")
    assert probe_gpus(None, probes=("nvidia-smi",))[0] == "nvidia-smi"  # the fake really answers
    source, gpus, notes = probe_gpus({"gpu_type": "T4", "count": 3, "speed": 0.5}, probes=("nvidia-smi",))
    assert source == "emulated" and [g["name"] for g in gpus] == ["T4"] * 3
    assert notes == ["nvidia-smi: 2 real GPU(s) (NVIDIA A100-SXM4-40GB) not used: this host declares emulated GPUs"]


def test_a_host_without_nvidia_ml_py_is_told_which_package_and_which_python(monkeypatch, tmp_path) -> None:
    """It said "nvml: No module named 'pynvml'", naming neither the package nor the interpreter,
    then pointed a real-GPU admin at emulate."""
    import sys

    from heet_tui.cluster.gpu_inventory import read_inventory
    from heet_tui.config.hosts_file import HostEntry

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails as where it is not installed
    monkeypatch.setenv("PATH", str(tmp_path))  # and no nvidia-smi
    source, gpus, notes = probe_gpus()
    assert (source, gpus) == ("none", [])
    assert notes[0] == f"nvml: pynvml is not importable by {sys.executable} (pip install nvidia-ml-py for that python)"
    warnings = read_inventory(HostEntry("gpu-a", "10.0.0.1", gpu_type="A100"),
                              {"source": source, "gpus": gpus, "notes": notes}, lambda real_type: [])[2]
    assert "a GPU host needs nvidia-ml-py for its python, or nvidia-smi on its PATH" in warnings[-1]


def test_a_lost_gpu_is_listed_broken_and_the_others_are_still_read():
    """One GPU fallen off the bus (Xid 79) failed the whole NVML reading: every GPU of the host went
    unread, and launches stopped on all of them; one lost between readings was offered as idle."""
    from heet_agent.inventory import utilization

    class GpuIsLost(NVMLError):
        pass

    mib = 1024 * 1024
    healthy = {"memory": SimpleNamespace(total=40960 * mib, used=0), "util": SimpleNamespace(gpu=0), "procs": [],
               "name": "NVIDIA A100-SXM4-40GB"}
    devices = [{**healthy, "uuid": "GPU-0"}, {**healthy, "uuid": "GPU-1"}, {**healthy, "uuid": "GPU-2", "util": None}]
    nvml = _recorded_nvml(devices)
    nvml.NVMLError_GpuIsLost = GpuIsLost
    listed = gpus_from_nvml(nvml)

    def lost_handle(index):
        if index == 1:
            raise GpuIsLost("GPU is lost")
        return index

    def lost_util(handle):
        if handle == 2:
            raise GpuIsLost("GPU is lost")
        return devices[handle]["util"]

    nvml.nvmlDeviceGetHandleByIndex, nvml.nvmlDeviceGetUtilizationRates = lost_handle, lost_util
    gpus = gpus_from_nvml(nvml)
    assert [(g["index"], g.get("error")) for g in gpus] == [(0, None), (1, "GPU is lost"), (2, "GPU is lost")]
    assert gpus[2]["uuid"] == "GPU-2", "still named: matched as the GPU it was"
    sample, _ = utilization(gpus, listed)
    assert sample[0] == {"index": 0, "utilization": 0.0, "memory_used_mb": 0, "processes": []}
    assert sample[2] == {"index": 2, "unread": True}, "lost since it was listed: unread, not idle"
