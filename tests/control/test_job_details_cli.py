"""``heet-tui jobs NAME``: one job's details (its runs, measurements, GPU time and events), split
from test_jobs_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.control.store import Store
from heet_tui.core.job import JobState

JOB = 'name = "cnn"\ncommand = ["python3", "-m", "train"]\nmodel = "m"\nbatch_size = 32\ntarget = { steps = 10 }\n'



def _submitted(tmp_path: Path) -> tuple[Path, list[str], Store]:
    """The JOB spec submitted to a fresh store: its file, the --state arguments, the store."""
    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    return spec, state, Store(tmp_path / "state")

def test_a_job_shows_what_its_profiling_cost_and_each_measured_configuration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU-seconds profiling spent were nowhere; the measured cells were in `jobs NAME`'s text only."""
    from heet_tui.control.profiling_cost import record_profiling_run
    from heet_tui.control.runtime import Run
    from heet_tui.core.allocation import Allocation

    spec, state, store = _submitted(tmp_path)
    record_profiling_run(store, Run("cnn", Allocation.of("cnn", "T4", {"h": [0]}), 1, {}, 100.0, profiling=True), 112.5)
    record_profiling_run(store, Run("cnn", Allocation.of("cnn", "A100", {"g": [0, 1]}), 2, {}, 100.0, profiling=True),
                         110.0)
    store.add_observation("cnn", "T4", "1", 300.0, 111.0, "profiling")
    store.add_observation("cnn", "A100", "2-2", 2000.0, 150.0, "running")
    capsys.readouterr()
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["profiling"] == {"runs": 2, "gpu_s": 32.5}, "1 GPU x 12.5 s + 2 GPUs x 10 s"
    assert shown["measured"] == [
        {"gpu_type": "A100", "per_host": [2, 2], "samples_per_s": 2000.0, "at": 150.0, "source": "running"},
        {"gpu_type": "T4", "per_host": [1], "samples_per_s": 300.0, "at": 111.0, "source": "profiling"}]
    # where each generation ran and the GPU time it trained, as data (a finished job's types were in event text)
    store.record_allocation(Allocation.of("cnn", "T4", {"h": [0]}), 3, 120.0)
    store.record_allocation(Allocation.of("cnn", "A100", {"g": [0, 1]}), 4, 130.0)
    store.release_allocation("cnn", 150.0)
    store.update_progress("cnn", 40, 1280.0, None, 47.5)
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["runs"] == [
        {"generation": 3, "gpu_type": "T4", "num_gpus": 1, "hosts": {"h": [0]}, "started_at": 120.0, "released_at": 130.0},
        {"generation": 4, "gpu_type": "A100", "num_gpus": 2, "hosts": {"g": [0, 1]}, "started_at": 130.0,
         "released_at": 150.0}]
    assert shown["gpu_s"] == 47.5 and shown["samples_per_s"] is None, "released: no speed now, as jobs --json says"
    assert main([*state, "jobs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["gpu_s"] == 47.5
    assert main([*state, "jobs", "cnn"]) == 0
    text = capsys.readouterr().out
    assert "profiling  2 run(s), 32 GPU-seconds" in text and "2+2xA100 2,000/s (running), 1xT4 300/s (profiling)" in text


def test_a_job_over_several_hosts_says_which_ranks_run_where_as_the_launch_numbers_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`log --rank R` and a rank's crash name a rank; nothing said which host held it."""
    from heet_tui.config.hosts_file import HostEntry
    from heet_tui.control.launch import plan_launch
    from heet_tui.core.allocation import Allocation

    spread = Allocation.of("cnn", "T4", {"b": [2, 3], "a": [0], "c": [1, 5, 7]})
    assert spread.ranks_on_hosts() == "ranks 0 on a, 1-2 on b, 3-5 on c"
    assert Allocation.of("cnn", "T4", {"a": [0, 1]}).ranks_on_hosts() == ""
    spec, state, store = _submitted(tmp_path)
    launches = plan_launch("cnn", store.job("cnn").job.spec, spread, 1,
                           {h: HostEntry(h, h, transport="local") for h in "abc"}, 29500)
    assert [(s.rank, s.host) for s in launches] == [(0, "a"), (1, "b"), (2, "b"), (3, "c"), (4, "c"), (5, "c")]
    store.set_state("cnn", JobState.RUNNING, 10.0)
    store.record_allocation(spread, 1, 10.0, store.job("cnn").job.spec)
    capsys.readouterr()
    assert main([*state, "jobs", "cnn"]) == 0
    now = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("now"))
    assert now.endswith("(generation 1; ranks 0 on a, 1-2 on b, 3-5 on c)"), now


def test_the_gpu_time_a_job_held_is_given_beside_what_it_reported_training(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The only figure was gpu_s, what runs reported training: 27-83 % of the GPUs x time a lab's
    small jobs held (start-up, the first report's interval, checkpoints and stops left out)."""
    import time as clock

    from heet_tui.core.allocation import Allocation

    spec, state, store = _submitted(tmp_path)
    t0 = clock.time() - 100.0
    store.record_allocation(Allocation.of("cnn", "T4", {"a": [0, 1]}), 1, t0)
    store.release_allocation("cnn", t0 + 10.0)  # 2 GPUs for 10 s
    store.record_allocation(Allocation.of("cnn", "T4", {"b": [3]}), 2, t0 + 30.0)  # 1 GPU since, still held
    store.set_state("cnn", JobState.RUNNING, t0 + 30.0)
    capsys.readouterr()
    assert main([*state, "jobs", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["jobs"]
    assert 20.0 + 70.0 <= row["held_gpu_s"] <= 20.0 + 75.0, row["held_gpu_s"]
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    assert abs(json.loads(capsys.readouterr().out)["held_gpu_s"] - row["held_gpu_s"]) < 5.0
    assert main([*state, "jobs", "cnn"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("gpu time"))
    assert "of GPU time held (GPUs x time, launch to release)" in line and "reported training" in line, line


def test_a_job_name_submitted_again_says_which_job_it_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`submit x.toml; log -f x` followed the old, ended job x while `cancel x` stopped the new x-2."""
    spec, state, store = _submitted(tmp_path)
    store.set_state("cnn", JobState.CANCELLED, 10.0)
    capsys.readouterr()
    assert main([*state, "jobs", "cnn"]) == 0
    assert capsys.readouterr().err == "", "no other job of its name: nothing to say"
    assert main([*state, "submit", str(spec), "--json"]) == 0
    newer = json.loads(capsys.readouterr().out)["id"]
    assert newer != "cnn"
    assert main([*state, "jobs", "cnn"]) == 0
    said = capsys.readouterr()
    assert said.out.startswith("cnn  cancelled")
    assert said.err == (f"heet-tui: cnn is the job of that id, cancelled; {newer}, of the same name and submitted "
                        "since, is queued: give its id for it\n"), said.err


def test_a_jobs_listed_events_say_how_many_it_has(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`jobs NAME --json` cut the events to the latest 20 unsaid: a script took them for all."""
    spec, state, store = _submitted(tmp_path)
    for i in range(24):
        store.add_event(100.0 + i, "progress", f"note {i}", job_id="cnn")
    store.add_event(200.0, "progress", "another job's", job_id="other")
    total = len(store.events("cnn", limit=1000))
    assert total == 25, "the submission's event and the 24"
    capsys.readouterr()
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["events_total"] == total and len(shown["events"]) == 20
    assert shown["events"][-1]["message"] == "note 23"
    assert main([*state, "jobs", "cnn"]) == 0
    assert f"events (the latest 20 of {total}; --events N for more):" in capsys.readouterr().out.splitlines()
    assert main([*state, "jobs", "cnn", "--events", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "events:" in out and "note 0" in "\n".join(out), "all of them, said as all"
