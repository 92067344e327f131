"""The Sia profile reader: real derived data, interpolation rules and clear errors on bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from heet_tui.profiling.sia_format import (
    EXTRAPOLATION_MARGIN,
    PlacementRow,
    ProfileFormatError,
    ScalabilityRow,
    even_placement,
    read_profiles,
)

DATA = Path(__file__).resolve().parents[2] / "heet_tui" / "data" / "profiles"  # shipped subset


def test_reads_every_model_and_type_with_default_mapping() -> None:
    profiles = read_profiles(DATA)
    assert set(profiles) == {"cifar10", "imagenet"}
    assert profiles["cifar10"].gpu_types() == ("A100", "RTX2080Ti", "T4")
    t4 = profiles["cifar10"].by_type["T4"]
    assert t4.node_type == "aws"
    assert t4.gpus_per_node == 4


def test_exact_rows_match_file_values_and_interpolate_linearly() -> None:
    t4 = read_profiles(DATA)["cifar10"].by_type["T4"]
    rows = {r.local_bsz: r.step_time for r in t4.placement_rows if r.placement == (1,)}
    assert t4.step_time((1,), 64) == pytest.approx(rows[64])
    above = min(b for b in rows if b > 64)  # the next profiled local batch
    mid = t4.step_time((1,), (64 + above) / 2)
    assert mid == pytest.approx((rows[64] + rows[above]) / 2, rel=0.02)
    # throughput = total GPUs * local batch / step time
    assert t4.throughput((2, 2), 4 * 64) == pytest.approx(4 * 64 / t4.step_time((2, 2), 64))


def test_placement_strings_are_sorted_largest_first_and_duplicates_averaged(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "placements-aws.csv").write_text(
        "local_bsz,placement,sync_time,step_time\n8,12,0,1.0\n8,21,0,3.0\n16,21,0,4.0\n")
    node = read_profiles(tmp_path)["m"].by_type["T4"]
    assert node.placements() == ((2, 1),)
    assert node.step_time((1, 2), 8) == pytest.approx(2.0)


def test_even_placements_fall_back_to_scalability_rows() -> None:
    t4 = read_profiles(DATA)["cifar10"].by_type["T4"]
    assert (2, 2, 2, 2, 2, 2) in t4.placements()
    assert t4.step_time((2, 2, 2, 2, 2, 2), 64) is not None
    assert t4.step_time((4, 1), 64) is None  # neither an explicit nor an even placement
    assert even_placement(6, 7) == (2, 1, 1, 1, 1, 1)


def test_extrapolation_only_within_margin() -> None:
    t4 = read_profiles(DATA)["cifar10"].by_type["T4"]
    hi = max(r.local_bsz for r in t4.placement_rows if r.placement == (1,))
    assert t4.step_time((1,), hi * (1 + EXTRAPOLATION_MARGIN / 2)) is not None
    assert t4.step_time((1,), hi * (1 + 2 * EXTRAPOLATION_MARGIN)) is None
    assert t4.throughput((1,), 0) is None


def test_throughput_rises_with_batch_on_one_gpu() -> None:
    a100 = read_profiles(DATA)["imagenet"].by_type["A100"]
    values = [a100.throughput((1,), b) for b in (20, 40, 81, 163)]
    assert all(v is not None for v in values)
    assert values == sorted(values)


def test_explicit_mapping_skips_unknown_node_types(tmp_path: Path) -> None:
    profiles = read_profiles(DATA, {"aws": "T4"})
    assert profiles["imagenet"].gpu_types() == ("T4",)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "placements-tpu.csv").write_text("placement,local_bsz,step_time,sync_time\n1,8,0.5,0\n")
    assert read_profiles(tmp_path)["m"].gpu_types() == ("tpu",)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ProfileFormatError, match="no placements"):
        read_profiles(empty)


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    if isinstance(text, bytes):
        (folder / name).write_bytes(text)
    else:
        (folder / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(("name", "text", "message"), [
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8,0.5,0\n" + "1,16,0.6,0\n" * 4 + "2,8,abc,0\n",
     'model/placements-aws.csv:7: column "step_time": not a number: "abc"'),
    ("placements-aws.csv", "placement,local_bsz,sync_time\n1,8,0\n",
     'model/placements-aws.csv:1: missing column "step_time"'),
    ("placements-aws.csv", "", "model/placements-aws.csv:1: empty file"),
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n", "model/placements-aws.csv:2: no data rows"),
    ("scalability-rtx.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n4,2,8,0.5,0\n",
     'model/scalability-rtx.csv:2: column "num_replicas"'),
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1x,8,0.5,0\n",
     'model/placements-aws.csv:2: column "placement": not a placement'),
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8.5,0.5,0\n",
     'model/placements-aws.csv:2: column "local_bsz": must be a whole number'),
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8,-1,0\n",
     'model/placements-aws.csv:2: column "step_time": must be a positive number'),
    # a row appended with a 10x step time was averaged in without a word (a JCT of 1.03 h became 5.52 h)
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8,0.02,0\n2,8,0.03,0\n1,8,0.2,0\n",
     "model/placements-aws.csv:4: placement 1, local_bsz 8 is measured again with step_time 0.2, 10.0x line 2's "
     "0.02: remove the wrong row"),
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8,0.0428,0\n1,8,0.12,0\n1,8,0.015,0\n",
     "model/placements-aws.csv:4: placement 1, local_bsz 8 is measured again with step_time 0.015, 8.0x line 3's 0.12"),
    ("scalability-rtx.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,4,8,0.5,0\n2,4,8,0.1,0\n",
     "model/scalability-rtx.csv:3: 4 GPUs on 2 nodes, local_bsz 8 is measured again with step_time 0.1, 5.0x"),
    # a field over csv's own limit was a traceback (_csv.Error)
    ("placements-aws.csv", "placement,local_bsz,step_time,sync_time\n1,8,0.5,0\n" + "a" * 200_000 + "\n",
     "model/placements-aws.csv:3: field larger than field limit"),
    ("placements-aws.csv", b"placement,local_bsz,step_time,sync_time\n1,8,\xb3,0\n",
     "model/placements-aws.csv:2: not valid UTF-8 (byte 0xb3)"),
])
def test_bad_files_name_file_line_and_column(tmp_path: Path, name: str, text: str | bytes, message: str) -> None:
    root = _write(tmp_path, name, text)
    with pytest.raises(ProfileFormatError) as info:
        read_profiles(root)
    assert message in str(info.value)


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileFormatError, match="not a directory"):
        read_profiles(tmp_path / "nope")


def test_columns_are_read_by_header_name_whatever_their_order() -> None:
    """The shipped files keep the artifact's headers: ``placement`` first for aws, last for dgx-ext."""
    a100 = read_profiles(DATA)["cifar10"].by_type["A100"]
    assert a100.placement_rows[0] == PlacementRow((1,), 32, 0.035044655203819275, 0.0007174400016665458)
    assert a100.scalability_rows[0] == ScalabilityRow(2, 4, 32, 0.030363887548446655, 0.0018928639963269234)
    t4 = read_profiles(DATA)["cifar10"].by_type["T4"]
    first = (DATA / "cifar10" / "placements-aws.csv").read_text().splitlines()[1].split(",")
    assert t4.placement_rows[0].local_bsz == int(first[1]) and t4.placement_rows[0].step_time == float(first[2])


def test_model_throughput_function_is_a_scheduler_oracle() -> None:
    model = read_profiles(DATA)["cifar10"]
    tput = model.throughput_function(256)
    assert tput("T4", (2, 2)) == pytest.approx(model.by_type["T4"].throughput((2, 2), 256))
    assert tput("H100", (1,)) == 0.0
    assert tput("T4", (4, 1)) == 0.0  # never profiled
