"""Which GPUs a host offers, and how heartbeats update them, on recorded hardware answers.

Seen with imitated NVML and nvidia-smi on hosts with mixed cards: a job limited to A100s ran on
the V100 and the RTX 2080 Ti of its host (the host read as its first GPU's type); when the
driver stopped answering, a GPU someone else computed on read as free and got a job; when a GPU
dropped off the bus, the others took its neighbours' readings (matched by index).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from heet_agent.inventory import gpus_from_nvml, parse_nvidia_smi_csv, utilization

from heet_tui.cluster.gpu_inventory import gpus_offered, read_inventory, with_sample
from heet_tui.config.hosts_file import HostEntry, load_hosts

DATA = Path(__file__).parent / "data"
BOX = HostEntry("box", "127.0.0.1")


def NO_NOTES(real_type: str) -> list[str]:  # noqa: N802 - a constant's role
    return []


def _raw(index: int, name: str, **extra: object) -> dict[str, object]:
    return {"index": index, "uuid": f"GPU-{index}", "name": name, "memory_mb": 40960, **extra}


def test_a_host_of_several_gpu_types_offers_its_main_type_and_says_how_to_use_the_rest() -> None:
    raw = [_raw(0, "NVIDIA A100-SXM4-80GB"), _raw(1, "NVIDIA A100-SXM4-80GB"), _raw(2, "Tesla V100-SXM2-16GB"),
           _raw(3, "NVIDIA A100-PCIE-40GB"), _raw(4, "NVIDIA GeForce RTX 2080 Ti"), _raw(5, "unknown")]
    gpus, warnings = gpus_offered(BOX, "nvml", raw)
    assert [(g.index, g.gpu_type) for g in gpus] == [(0, "A100"), (1, "A100"), (3, "A100")]
    assert warnings == ["GPUs of 4 types: jobs here run on the 3xA100 only (gpus 0,1,3); left out: V100 (gpus = [2]), "
                        "RTX2080Ti (gpus = [4]), unknown (gpus = [5]): give each an entry of its own in the hosts "
                        "file, with the same address and those gpus"]
    split = HostEntry("box-v100", "127.0.0.1", gpus=(2,))
    assert [(g.index, g.gpu_type) for g in gpus_offered(split, "nvml", raw)[0]] == [(2, "V100")]
    # the file's gpu_type names the GPUs the driver cannot (5), not the V100 and the RTX beside the
    # A100s: they were offered as A100s, with only a warning
    declared = HostEntry("box", "127.0.0.1", gpu_type="A100")
    gpus, warnings = gpus_offered(declared, "nvml", raw)
    assert [(g.index, g.gpu_type) for g in gpus] == [(0, "A100"), (1, "A100"), (3, "A100"), (5, "A100")]
    assert warnings == ["GPUs of 3 types: jobs here run on the 4xA100 only (gpus 0,1,3,5); left out: V100 (gpus = [2]), "
                        "RTX2080Ti (gpus = [4]): give each an entry of its own in the hosts file, with the same "
                        "address and those gpus"]
    # a tie goes to the type of the lowest index
    assert [g.index for g in gpus_offered(BOX, "nvml", [_raw(0, "Tesla T4"), _raw(1, "NVIDIA A10")])[0]] == [0]


def test_a_declared_gpu_type_that_the_driver_names_otherwise_is_said_whole_words_only() -> None:
    """"A10" was taken for an A100 and "L4" for an L40S (a substring test), unsaid."""
    for declared, name in (("A100", "NVIDIA A10"), ("L40S", "NVIDIA L4"), ("RTX2080", "NVIDIA GeForce RTX 2080 Ti"),
                           ("A10", "NVIDIA A10G"), ("H100", "NVIDIA H100 NVL"), ("V100", "Tesla V100S-PCIE-32GB")):
        gpus, warnings = gpus_offered(HostEntry("box", "127.0.0.1", gpu_type=declared), "nvml", [_raw(0, name)])
        assert [g.gpu_type for g in gpus] == [declared]
        assert warnings and "but the driver names its GPUs" in warnings[0], (declared, warnings)
    for declared, names in (("A100-80G", ["NVIDIA A100-SXM4-80GB"]), ("A100 80GB", ["NVIDIA A100-SXM4-80GB"]),
                            ("RTX 2080 Ti", ["NVIDIA GeForce RTX 2080 Ti"]), ("A100-SXM4", ["NVIDIA A100-SXM4-40GB"]),
                            ("V100", ["Tesla V100-SXM2-32GB", "Tesla V100-PCIE-16GB"])):  # one type: one group
        fine = HostEntry("box", "127.0.0.1", gpu_type=declared)
        gpus, warnings = gpus_offered(fine, "nvml", [_raw(i, n) for i, n in enumerate(names)])
        assert warnings == [] and [g.gpu_type for g in gpus] == [declared] * len(names), (declared, warnings)


def test_a_gpu_in_mig_mode_is_left_out_and_said_so() -> None:
    source, gpus, warnings = read_inventory(BOX, {"source": "nvml", "gpus": [
        _raw(0, "NVIDIA A100-SXM4-40GB", mig=True), _raw(1, "NVIDIA A100-SXM4-40GB")]}, NO_NOTES)
    assert source == "nvml" and [g.index for g in gpus] == [1]
    assert warnings == ["gpu 0 left out: MIG mode is on (heet-tui hands out whole GPUs; "
                        "nvidia-smi -i N -mig 0 turns it off)"]
    assert read_inventory(BOX, {"source": "nvml", "gpus": [_raw(0, "A100", mig=True)]}, NO_NOTES)[1] == ()
    class Nvml(SimpleNamespace):
        def __getattr__(self, name: str):  # every other query unsupported, as on some cards
            def unsupported(*_: object) -> None:
                raise RuntimeError("Not Supported")
            return unsupported

    nvml = Nvml(nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
                nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: b"NVIDIA A100-SXM4-40GB",
                nvmlDeviceGetMigMode=lambda h: [1 - h, 1 - h])
    assert [g.get("mig") for g in gpus_from_nvml(nvml)] == [True, None]


def test_a_gpu_the_agent_could_not_read_keeps_the_processes_last_seen_on_it() -> None:
    gpus, _ = gpus_offered(BOX, "nvml", [_raw(0, "Tesla V100"), _raw(1, "Tesla V100")])
    seen = with_sample(gpus, [{"index": 0, "utilization": 3, "others": []},
                              {"index": 1, "utilization": 97, "others": [{"pid": 4242, "name": "python"}]}])
    assert seen[1].others == ("pid 4242 python",) and seen[1].utilization == 97.0
    unread = with_sample(seen, [{"index": 0, "unread": True}, {"index": 1, "unread": True}])
    assert unread[1].others == ("pid 4242 python",) and unread[1].utilization is None
    assert with_sample(unread, [{"index": 1, "utilization": 0, "others": []}])[1].others == ()


def test_heartbeat_readings_follow_each_gpu_by_uuid_and_say_what_changed() -> None:
    listed = [_raw(0, "V100", utilization=0), _raw(1, "V100", utilization=10), _raw(2, "V100", utilization=20)]
    assert utilization(listed, listed)[1] == ""
    renumbered = [dict(listed[1], index=0), dict(listed[2], index=1)]  # gpu0 fell off the bus
    sample, changed = utilization(renumbered, listed)
    assert [(g["index"], g.get("utilization"), g.get("unread")) for g in sample] == [
        (0, None, True), (1, 10, None), (2, 20, None)]
    assert changed == "the GPUs changed since they were listed: gpu0 gone; gpu1 is now 0, gpu2 is now 1"
    added = listed + [_raw(3, "V100")]
    assert utilization(added, listed)[1] == "the GPUs changed since they were listed: gpu3 new"
    assert utilization(None, listed) == ([{"index": i, "unread": True} for i in range(3)], "")
    assert utilization([], listed)[1] == "the GPUs changed since they were listed: gpu0, gpu1, gpu2 gone"


def test_nvidia_smi_names_with_commas_and_unreadable_names() -> None:
    text = ("0, GPU-a, NVIDIA A100, rev B, 40960, 3, 0\n"
            "1, GPU-b, [N/A], 40960, 3, 0\n"
            "WARNING: infoROM is corrupted at gpu 0000:3B:00.0\n")
    assert [(g["index"], g["name"]) for g in parse_nvidia_smi_csv(text)] == [(0, "NVIDIA A100, rev B"),
                                                                            (1, "unknown")]
    assert len(parse_nvidia_smi_csv((DATA / "nvidia-smi-mixed.csv").read_text())) == 2


def test_real_gpus_of_a_type_other_hosts_emulate_are_a_warning(tmp_path: Path) -> None:
    """One job was placed across an emulated A100 (CPU, gloo) and real A100s (CUDA, NCCL)."""
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "box"\naddress = "127.0.0.1"\n\n'
                    '[[hosts]]\nname = "emu"\ntransport = "local"\n'
                    'emulate = { gpu_type = "a100", count = 1, speed = 1.0 }\n')
    hosts = load_hosts(path)
    _, _, warnings = read_inventory(hosts.hosts[0], {"source": "nvidia-smi", "gpus": [_raw(0, "NVIDIA A100-SXM4-40GB")]},
                                    lambda real_type: [w for w in (hosts.emulation_clash("box", real_type),) if w])
    assert warnings == ["real A100 GPUs here, and emu emulate A100: one job may be placed across both, and real and "
                        "emulated ranks cannot train together; give the emulated GPUs a type of their own "
                        '(emulate = { gpu_type = "A100-emu", ... })']
    assert hosts.emulation_clash("box", "V100") is None and hosts.emulation_clash("emu", "") is None



def test_a_gpu_nvidia_smi_calls_broken_is_left_out_and_said_so() -> None:
    """"[GPU requires reset]" became the GPU's name (hidden by the declared gpu_type), and a
    two-GPU job was launched onto it; an "ERR!" reading was taken as missing."""
    text = ("0, GPU-a, NVIDIA A100-SXM4-40GB, 40960, 10, 0\n"
            "1, GPU-b, [GPU requires reset], [GPU requires reset], [GPU requires reset], [GPU requires reset]\n"
            "2, GPU-c, NVIDIA A100-SXM4-40GB, 40960, ERR!, ERR!\n"
            "3, GPU-d, NVIDIA A100-SXM4-40GB, 40960, [N/A], [N/A]\n")
    raw = parse_nvidia_smi_csv(text)
    assert [g.get("error") for g in raw] == [None, "[GPU requires reset]", "ERR!", None], "[N/A] is no error"
    declared = HostEntry("box", "127.0.0.1", gpu_type="A100")
    _, gpus, warnings = read_inventory(declared, {"source": "nvidia-smi", "gpus": raw}, NO_NOTES)
    assert [g.index for g in gpus] == [0, 3]
    assert warnings == ["left out, as nvidia-smi reports: gpu1 ([GPU requires reset]), gpu2 (ERR!); see "
                        "nvidia-smi -q and dmesg (Xid) on the host"]


def test_a_declared_gpu_type_the_driver_contradicts_is_a_warning() -> None:
    """A copied entry said gpu_type = "A100" of RTX 4090s: A100-only jobs went to consumer cards,
    and the real name was shown nowhere."""
    raw = [_raw(0, "NVIDIA GeForce RTX 4090"), _raw(1, "NVIDIA GeForce RTX 4090")]
    _, gpus, warnings = read_inventory(HostEntry("b", "127.0.0.1", gpu_type="A100"),
                                       {"source": "nvml", "gpus": raw}, NO_NOTES)
    assert [g.gpu_type for g in gpus] == ["A100", "A100"], "the hosts file has the last word"
    assert warnings == ['gpu_type = "A100" in the hosts file, but the driver names its GPUs RTX4090: plans treat '
                        "them as A100"]
    a100 = [_raw(0, "NVIDIA A100-SXM4-80GB")]
    assert read_inventory(HostEntry("b", "127.0.0.1", gpu_type="A100-80G"), {"source": "nvml", "gpus": a100},
                          NO_NOTES)[2] == [], "a finer name of the same type is the user's to choose"
