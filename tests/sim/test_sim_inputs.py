"""Bad inputs end in a clear error naming the file and line, or a per-job outcome; never a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted import ScriptedPolicy
from sim_support import cluster_of

from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.rigid_fifo import RigidFifoPolicy
from heet_tui.sim import engine
from heet_tui.sim.cluster_spec import load_cluster
from heet_tui.sim.engine import Simulation
from heet_tui.sim.errors import PolicyError, SimInputError
from heet_tui.sim.physics import load_physics
from heet_tui.sim.workload import WorkloadJob, load_workload

HEADER = "name,time,application,num_replicas,batch_size\n"


def _write(tmp_path: Path, text: str, name: str = "w.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("body", "needle"), [
    ("a,10,cifar10,2,128\nb,5,cifar10,2,128\n", ":3: job 'b' submitted at 5 s, before the previous row"),
    ("a,10,cifar10,2\n", ":2: 4 fields, header has 5"),
    ("a,10,cifar10,two,128\n", ':2: column "num_replicas": not a number: "two"'),
    ("a,10,cifar10,-2,128\n", ':2: column "num_replicas": must be positive'),
    ("a,10,cifar10,2,128\na,11,cifar10,2,128\n", ":3: job name 'a' already used on line 2"),
    ("", ":2: no jobs after the header"),
    # a time of 1e300 trained "in 0 s" (float rounding) and halved the average JCT
    ("a,1e300,cifar10,2,128\n", ':2: column "time": 1e300 is beyond any real workload'),
    ("a,0,cifar10,2,1e20\n", ':2: column "batch_size": 1e20 is beyond any real workload'),
    ("a,0,cifar10,2," + "9" * 140_000 + "\n", ":2: field larger than field limit"),  # was a traceback
])
def test_malformed_workloads_name_the_line(tmp_path: Path, body: str, needle: str) -> None:
    path = _write(tmp_path, HEADER + body)
    with pytest.raises(SimInputError) as err:
        load_workload(path)
    assert str(err.value).startswith(str(path))
    assert needle in str(err.value)


def test_missing_column_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(SimInputError, match=r":1: missing column\(s\) batch_size"):
        load_workload(_write(tmp_path, "name,time,application,num_replicas\na,1,cifar10,2\n"))
    with pytest.raises(SimInputError, match=":1: empty workload"):
        load_workload(_write(tmp_path, "\n", "empty.csv"))



def test_a_misspelt_or_repeated_column_is_refused_not_skipped(tmp_path: Path) -> None:
    """"max_gpu" was skipped, and a job capped at one GPU ran on two (JCT 390 s for 690 s); a
    second "time" column was not read, without a word."""
    with pytest.raises(SimInputError, match=r':1: unknown column "max_gpu" \(did you mean "max_gpus"\?\)'):
        load_workload(_write(tmp_path, HEADER.strip() + ",max_gpu\na,0,cifar10,1,100,1\n"))
    with pytest.raises(SimInputError, match=':1: column "time" appears 2 times in the header'):
        load_workload(_write(tmp_path, HEADER.strip() + ",time\na,0,cifar10,1,100,5\n"))
    with pytest.raises(SimInputError, match=r':1: unknown column "Max_GPUs" \(did you mean "max_gpus"\?\)'):
        load_workload(_write(tmp_path, HEADER.strip() + ",Max_GPUs\na,0,cifar10,1,100,1\n"))
    with pytest.raises(SimInputError, match=r":1: a column with no name in the header \(a comma too many\?\)"):
        load_workload(_write(tmp_path, HEADER.strip() + ",\na,0,cifar10,1,100,\n"))
    assert load_workload(_write(tmp_path, HEADER.strip() + ",min_gpus,max_gpus\na,0,cifar10,1,100,1,2\n"))


def test_unknown_application_names_the_row(tmp_path: Path, physics) -> None:
    path = _write(tmp_path, HEADER + "a,0,cifar10,2,128\nb,1,resnet9000,2,128\n")
    with pytest.raises(SimInputError) as err:
        Simulation(cluster_of(("aws", 1)), load_workload(path), physics, RigidFifoPolicy(), source_label=str(path))
    assert f"{path}:3: job 'b': unknown application 'resnet9000'" in str(err.value)
    assert "cifar10" in str(err.value)


def test_missing_profile_for_a_gpu_type(profile_dir: Path) -> None:
    with pytest.raises(SimInputError, match=r"placements-quad\.csv .*for any model .*'Quadro'"):
        load_physics(profile_dir, {"aws": "T4", "quad": "Quadro"})


def test_csv_inputs_saved_with_a_byte_order_mark_load(tmp_path: Path, profile_dir: Path) -> None:
    import shutil

    from heet_tui.sim.generate import read_trace

    bom = "\ufeff"
    plain = HEADER + "a,0,cifar10,2,128\n"
    assert load_workload(_write(tmp_path, bom + plain, "bom.csv")) == load_workload(_write(tmp_path, plain))
    trace = _write(tmp_path, bom + "timestamp,num_gpus,gpu_time\n2017-10-01 00:00:00,2,100\n", "trace.csv")
    assert [(j.num_gpus, j.gpu_time) for j in read_trace(trace)] == [(2, 100.0)]
    profiles = tmp_path / "profiles"
    shutil.copytree(profile_dir / "cifar10", profiles / "cifar10")
    for name in ("placements-aws.csv", "validation-128.csv"):
        path = profiles / "cifar10" / name
        path.write_text(bom + path.read_text())
    physics = load_physics(profiles, {"aws": "T4"})
    assert physics.get("cifar10").gpu_types() == ("T4",)
    cluster = _write(tmp_path, bom + 'name = "c"\n[[node_types]]\nname = "aws"\ngpu_type = "T4"\n'
                     "gpus_per_node = 4\ncount = 2\n", "bom.toml")
    assert load_cluster(cluster).total_gpus == 8, "a BOM in the cluster file too"


def test_a_node_type_the_workloads_model_has_no_profile_for_is_left_to_other_models(tmp_path: Path,
                                                                                     profile_dir: Path) -> None:
    """A gpt_pmp-only workload was refused on the reference cluster: its T4 nodes are profiled for
    other models, not for gpt_pmp, which simply does not run there."""
    import shutil

    shutil.copytree(profile_dir / "cifar10", tmp_path / "cifar10")
    shutil.copytree(profile_dir / "imagenet", tmp_path / "imagenet", ignore=shutil.ignore_patterns("*-aws.csv"))
    physics = load_physics(tmp_path, {"aws": "T4", "rtx": "RTX2080Ti"}, models=["imagenet"])
    assert physics.get("imagenet").gpu_types() == ("RTX2080Ti",)
    with pytest.raises(SimInputError, match=r"no placements-h100\.csv or scalability-h100\.csv for any model"):
        load_physics(tmp_path, {"aws": "T4", "h100": "H100"}, models=["imagenet"])


def test_a_job_whose_model_is_profiled_on_none_of_the_clusters_types_is_unschedulable(tmp_path: Path,
                                                                                      profile_dir: Path) -> None:
    """It refused the whole run: "unknown application 'gpt_pmp' (profiles in ...: bert, ..., gpt_pmp, ...)"."""
    import shutil

    shutil.copytree(profile_dir / "cifar10", tmp_path / "cifar10")
    shutil.copytree(profile_dir / "imagenet", tmp_path / "imagenet", ignore=shutil.ignore_patterns("*-aws.csv"))
    physics = load_physics(tmp_path, {"aws": "T4"}, models=["cifar10", "imagenet"])
    jobs = [WorkloadJob("ok", 0.0, "cifar10", 2, 128), WorkloadJob("nowhere", 0.0, "imagenet", 2, 200)]
    records = {r.name: r for r in Simulation(cluster_of(("aws", 1)), jobs, physics, RigidFifoPolicy()).run()}
    assert records["ok"].outcome == "done"
    assert records["nowhere"].outcome == "unschedulable"
    assert "with a profile for 'imagenet'" in records["nowhere"].message and "profiled: on none of the cluster's GPU types" in records["nowhere"].message


def test_missing_validation_files(tmp_path: Path, profile_dir: Path) -> None:
    import shutil

    shutil.copytree(profile_dir / "cifar10", tmp_path / "cifar10",
                    ignore=shutil.ignore_patterns("validation-*"))
    with pytest.raises(SimInputError, match="no validation-<batch>.csv"):
        load_physics(tmp_path, {"aws": "T4"})


def test_a_job_that_fits_nowhere_is_unschedulable_and_the_run_ends(physics) -> None:
    jobs = [WorkloadJob("big", 0.0, "cifar10", 100, 4096, min_gpus=100),
            WorkloadJob("ok", 0.0, "cifar10", 2, 128)]
    sim = Simulation(cluster_of(("aws", 1)), jobs, physics, RigidFifoPolicy())
    records = {r.name: r for r in sim.run()}
    assert records["big"].outcome == "unschedulable"
    assert "needs at least 100 GPUs" in records["big"].message
    assert records["ok"].outcome == "done"
    # a batch above every validated one trains at the largest, as the workload's note says (it was
    # unschedulable, "runs on no profiled configuration", where a smaller huge one ran as micro-steps of 1)
    def alone(batch: int):
        return Simulation(cluster_of(("aws", 1)), [WorkloadJob("huge", 0.0, "cifar10", 2, batch)], physics,
                          RigidFifoPolicy()).run()[0]

    huge, largest = alone(99_999_999), alone(int(physics.get("cifar10").validation.max_batch_size))
    assert huge.outcome == largest.outcome == "done" and huge.jct_s == largest.jct_s


def test_a_policy_that_never_allocates_cannot_hang_the_run(physics) -> None:
    sim = Simulation(cluster_of(("aws", 1)), [WorkloadJob("j", 0.0, "cifar10", 2, 128)], physics,
                     ScriptedPolicy(lambda now, jobs: {}))
    (record,) = sim.run()
    assert record.outcome == "unschedulable"
    assert sim.rounds <= engine.MAX_IDLE_ROUNDS + 1


def test_a_double_booking_policy_is_reported(physics) -> None:
    def both_on_gpu0(now: float, jobs) -> dict[str, Allocation]:
        return {j.id: Allocation.of(j.id, "T4", {"aws-0": [0]}) for j in jobs}

    jobs = [WorkloadJob("a", 0.0, "cifar10", 1, 128), WorkloadJob("b", 0.0, "cifar10", 1, 128)]
    sim = Simulation(cluster_of(("aws", 1)), jobs, physics, ScriptedPolicy(both_on_gpu0))
    with pytest.raises(PolicyError, match=r"GPU aws-0\[0\] given to both 'a' and 'b'"):
        sim.step()


@pytest.mark.parametrize(("text", "needle"), [
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ncount = 2\n', ':1: node type \'aws\': "gpus_per_node" must be'),
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 4\ncount = 0\n', ':5: node type \'aws\': "count" must'),
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpu_per_node = 4\ncount = 1\n', ":4: node type #1: unknown key(s) gpu_"),
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 4\ncount = 1\n[[node_types]]\nname = "rtx"\n'
     'gpu_type = "T4"\ngpus_per_node = 8\ncount = 1\n', ":8: node type 'rtx': 'T4' is also the GPU type of node type 'aws'"),
    ('name = "x"\n', ":1: no [[node_types]] tables"),
    ('[[node_types]\n', ":1: TOML syntax error: Expected"),
    # a traceback (10**20) and a run that never ended (a billion nodes)
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 99999999999999999999\ncount = 1\n',
     ":4: node type 'aws': \"gpus_per_node\" 99999999999999999999 is more than the simulator takes (at most 64)"),
    ('[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 8\ncount = 10000\n',
     ": 80,000 GPUs in all, more than the simulator takes (at most 65,536)"),
    ('nmae = "x"\n[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 8\ncount = 1\n',
     ":1: unknown key(s) nmae (known: name, node_types)"),
    ('name = 5\n[[node_types]]\nname = "aws"\ngpu_type = "T4"\ngpus_per_node = 8\ncount = 1\n',
     ':1: "name" must be a non-empty string, got 5'),
    ("x = " + "[" * 1000 + "]" * 1000 + "\n", ": arrays or tables nested too deep to read"),
    # 100 MB took 3.6 s and 300 MB to read
    ('name = "x"\n' + "#" * (4 << 20) + "\n", ": over 4 MiB: not a cluster file"),
])
def test_bad_cluster_files(tmp_path: Path, text: str, needle: str) -> None:
    path = _write(tmp_path, text, "c.toml")
    with pytest.raises(SimInputError) as err:
        load_cluster(path)
    assert str(err.value).startswith(str(path))
    assert needle in str(err.value)


def test_the_bundled_reference_cluster(repo: Path) -> None:
    cluster = load_cluster(repo / "configs" / "sim" / "sia-64gpu.toml")
    assert cluster.total_gpus == 64
    assert {t: cluster.gpus_of_type(t) for t in cluster.gpu_types()} == {"A100": 16, "RTX2080Ti": 24, "T4": 24}


@pytest.mark.parametrize("predictor", ["oracle", "model", "simple"])
@pytest.mark.parametrize("policy", ["heet", "heet-lookahead", "goodput-mip", "fifo", "srtf", "gavel"])
def test_a_job_that_runs_only_on_more_gpus_than_its_minimum_is_scheduled(profile_dir: Path, tmp_path: Path,
                                                                         policy: str, predictor: str) -> None:
    """A model profiled on 2+ GPUs only (pipeline parallel, as the shared gpt_pmp) was declared
    unschedulable at once: feasibility was tried at the job's minimum count alone. goodput-mip then
    never started it: it weighed each choice against the job's speed at its minimum count, zero.
    Predicted, it crashed the run (the profiler measured 1-GPU runs only, so nothing at all), or,
    with the simple predictor, was never started."""
    from heet_tui.scheduling.registry import make_policy

    physics = _two_gpus_or_more(profile_dir, tmp_path)
    sim = Simulation(cluster_of(("aws", 1)), [WorkloadJob("j", 0.0, "cifar10", 2, 128, min_gpus=1)], physics,
                     make_policy(policy), oracle=predictor == "oracle", predictor=predictor)
    (record,) = sim.run()
    assert record.outcome == "done", record.message


def test_a_job_placed_where_it_makes_no_progress_cannot_hang_the_run(profile_dir: Path, tmp_path: Path) -> None:
    """The simple predictor put a 2+-GPU job on 15 GPUs, a count it cannot run at: it sat there
    "running" at no speed, and the run never ended."""
    def on_one_gpu(now: float, jobs) -> dict[str, Allocation]:
        return {j.id: Allocation.of(j.id, "T4", {"aws-0": [0]}) for j in jobs}

    sim = Simulation(cluster_of(("aws", 1)), [WorkloadJob("j", 0.0, "cifar10", 2, 128)],
                     _two_gpus_or_more(profile_dir, tmp_path), ScriptedPolicy(on_one_gpu))
    (record,) = sim.run()
    assert record.outcome == "unschedulable"
    assert record.message.startswith(f"made no progress for {engine.MAX_IDLE_ROUNDS} rounds: cannot run on 1xT4")
    assert sim.rounds <= engine.MAX_IDLE_ROUNDS + 2


def _two_gpus_or_more(profile_dir: Path, tmp_path: Path):
    """cifar10 with no 1-GPU placement anywhere, as a pipeline-parallel model is profiled."""
    import shutil

    root = tmp_path / "profiles"
    shutil.copytree(profile_dir / "cifar10", root / "cifar10")
    for node in ("aws", "rtx", "dgx-ext"):
        placements = root / "cifar10" / f"placements-{node}.csv"
        lines = placements.read_text().splitlines()
        placements.write_text("\n".join([lines[0], *(row for row in lines[1:] if not row.startswith("1,"))]) + "\n")
    physics = load_physics(root, {"aws": "T4"})
    assert physics.get("cifar10").throughput("T4", (1,), 128) == 0 < physics.get("cifar10").throughput("T4", (2,), 128)
    return physics


@pytest.mark.parametrize(("row", "needle"), [
    ("j,0,cifar10,4,2048,1,2", ":2: num_replicas 4 is outside the job's range min_gpus 1 .. max_gpus 2"),
    ("j,0,cifar10,4,2048,20,", ":2: num_replicas 4 is outside the job's range min_gpus 20 .. max_gpus -"),
    ("j,-50,cifar10,4,2048,,", ':2: column "time": must be 0 or more, got "-50"'),
])
def test_a_rigid_count_outside_the_jobs_own_range_is_refused(tmp_path: Path, row: str, needle: str) -> None:
    """rigid-fifo started a job of range 1-2 on 4 GPUs, its num_replicas, without a word."""
    path = _write(tmp_path, HEADER.rstrip("\n") + ",min_gpus,max_gpus\n" + row + "\n")
    with pytest.raises(SimInputError, match=needle.replace(".", r"\.")):
        load_workload(path)


def test_upper_case_csv_files_of_a_directory_are_read(tmp_path: Path) -> None:
    from heet_tui.sim.workload import workload_files

    _write(tmp_path, HEADER + "a,0,cifar10,2,128\n", "A.CSV")
    _write(tmp_path, HEADER + "a,0,cifar10,2,128\n", "b.csv")
    (tmp_path / "notes.txt").write_text("not a workload")
    assert [p.name for p in workload_files(tmp_path)] == ["A.CSV", "b.csv"]


def test_a_rigid_count_no_gpu_type_holds_is_unschedulable_at_submission(physics) -> None:
    """fifo waited four simulated hours for 500 GPUs and then blamed itself: "allocated nothing";
    then it named the count, but only after 240 idle rounds (simulated days at 900 s rounds)."""
    from heet_tui.scheduling.registry import make_policy

    sim = Simulation(cluster_of(("aws", 1)), [WorkloadJob("huge", 0.0, "cifar10", 500, 4096)], physics,
                     make_policy("fifo"))
    (record,) = sim.run()
    assert record.outcome == "unschedulable"
    assert record.message == ("policy 'fifo' gives each job exactly the 500 GPUs it asks for (num_replicas), "
                              "and the most GPUs of one type that the cluster holds and its model's profiles reach is 4"), \
        record.message
    assert sim.rounds <= 2, "said when it was submitted"
    # 16 T4s, but cifar10 is profiled on at most 12 of them: 14 never run (it waited 240 rounds)
    beyond = Simulation(cluster_of(("aws", 4)), [WorkloadJob("wide", 0.0, "cifar10", 14, 4096)], physics,
                        make_policy("fifo"))
    (record,) = beyond.run()
    assert record.outcome == "unschedulable" and record.message.endswith("its model's profiles reach is 12"), record.message
    assert beyond.rounds <= 2
    elastic = Simulation(cluster_of(("aws", 1)), [WorkloadJob("huge", 0.0, "cifar10", 500, 4096)], physics,
                         make_policy("heet"))
    (ran,) = elastic.run()
    assert ran.outcome != "unschedulable", "an elastic policy runs it at what the cluster has"


@pytest.mark.parametrize(("row", "needle"), [
    ("2017-10-01 00:00:00,0,100", ':2: column "num_gpus": must be positive, got "0"'),
    ("2017-10-01 00:00:00,1.5,100", ':2: column "num_gpus": 1.5 is not a whole number of GPUs'),
    ("2017-10-01 00:00:00,2,nan", ':2: column "gpu_time": must be positive, got "nan"'),
    ("yesterday,2,100", ':2: column "timestamp": not a date and time: "yesterday"'),
])
def test_a_bad_trace_row_is_named_not_dropped(tmp_path: Path, row: str, needle: str) -> None:
    """`sim generate` dropped rows of 0 or NaN GPUs without a word, and made 1.5 GPUs 1."""
    from heet_tui.sim.generate import read_trace

    trace = _write(tmp_path, f"timestamp,num_gpus,gpu_time\n{row}\n2017-10-01 00:01:00,2,100\n", "trace.csv")
    with pytest.raises(SimInputError) as err:
        read_trace(trace)
    assert str(err.value).startswith(str(trace)) and needle in str(err.value)


def test_a_trace_time_with_an_offset_keeps_it(tmp_path: Path) -> None:
    from heet_tui.sim.generate import read_trace

    trace = _write(tmp_path, "timestamp,num_gpus,gpu_time\n2017-10-01 02:00:00+02:00,1,5\n2017-10-01 00:30:00,1,5\n",
                   "trace.csv")
    assert [j.t for j in read_trace(trace)] == [1506816000.0, 1506817800.0]


@pytest.mark.parametrize(("rows", "needle"), [
    # the line, not only the file
    ([("0.1", "1", "1"), ("0.3", "1", "1"), ("0.2", "1", "1")],
     'validation-128.csv:4: column "progress": 0.2 after 0.3: it must not decrease'),
    # accepted, a job of the model "finished" after its restart pause
    ([("0", "1", "1"), ("0", "1", "1")], 'validation-128.csv:3: column "progress": no progress by the last epoch'),
])
def test_a_validation_file_that_cannot_be_right_is_refused_at_its_line(tmp_path: Path, profile_dir: Path,
                                                                       rows, needle) -> None:
    import shutil

    shutil.copytree(profile_dir / "cifar10", tmp_path / "cifar10")
    (tmp_path / "cifar10" / "validation-128.csv").write_text(
        "progress,grad_sqr,grad_var\n" + "".join(",".join(row) + "\n" for row in rows))
    with pytest.raises(SimInputError) as err:
        load_physics(tmp_path, {"aws": "T4"})
    assert needle in str(err.value), str(err.value)


@pytest.mark.parametrize("policy", ["fifo", "gavel", "srtf", "rigid-fifo"])
def test_a_rigid_count_the_model_cannot_run_at_is_unschedulable_at_submission(profile_dir: Path, tmp_path: Path,
                                                                              policy: str) -> None:
    """A pipeline-parallel model asking for 1 GPU waited 240 idle rounds under the rigid policies
    ("allocated nothing ... while the cluster was idle"), though it runs on 2 or more."""
    from heet_tui.scheduling.registry import make_policy

    physics = _two_gpus_or_more(profile_dir, tmp_path)
    sim = Simulation(cluster_of(("aws", 1)), [WorkloadJob("j", 0.0, "cifar10", 1, 128)], physics, make_policy(policy))
    (record,) = sim.run()
    assert record.outcome == "unschedulable"
    asked = "at most" if policy == "rigid-fifo" else "exactly"
    assert record.message.startswith(f"policy {policy!r} gives each job {asked} the 1 GPU it asks for (num_replicas), "
                                     "and 'cifar10' at batch size 128 runs on no profiled configuration of"), record.message
    assert sim.rounds <= 2, "said when it was submitted"
    # asking for 2, it runs (rigid-fifo too, which takes the largest count it runs at up to the request)
    ok = Simulation(cluster_of(("aws", 1)), [WorkloadJob("j", 0.0, "cifar10", 2, 128)], physics, make_policy(policy))
    assert ok.run()[0].outcome == "done"
