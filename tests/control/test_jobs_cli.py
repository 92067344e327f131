"""``heet-tui submit / jobs / cancel`` against the state store, with no controller running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.control.store import Store
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

JOB = 'name = "cnn"\ncommand = ["python3", "-m", "train"]\nmodel = "m"\nbatch_size = 32\ntarget = { steps = 10 }\n'


def test_submit_list_cancel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    assert main([*state, "submit", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"id": "cnn-2", "name": "cnn", "state": "queued",
                                                                    "resubmitted": True}
    assert main([*state, "jobs", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["controller_pid"] is None and [j["id"] for j in listing["jobs"]] == ["cnn", "cnn-2"]
    assert main([*state, "cancel", "cnn"]) == 0
    assert "cancelled cnn" in capsys.readouterr().out
    store = Store(tmp_path / "state")
    assert store.job("cnn").job.state is JobState.CANCELLED and store.job("cnn-2").job.state is JobState.QUEUED
    assert main([*state, "jobs"]) == 0
    table = capsys.readouterr().out
    assert "cnn-2" in table and "queued" in table and "controller: not running" in table
    # a queued job's "waiting for approval: heet-tui plan approve" read as something to do now
    assert "are as the last one left them; nothing moves, and no plan can be approved" in table
    assert table.splitlines()[0].split()[6:8] == ["AGE", "TOOK"]
    assert main([*state, "jobs", "--json"]) == 0
    rows = {j["id"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert rows["cnn-2"]["jct_s"] is None and rows["cnn-2"]["ended_at"] is None, "still queued"
    cancelled = store.job("cnn").job
    assert rows["cnn"]["jct_s"] == round(cancelled.history[-1][0] - cancelled.submitted_at, 3) >= 0
    assert rows["cnn-2"]["samples_per_s"] is None, "not running"
    # a running job's latest measured speed (scripts parsed `jobs NAME` for it)
    from heet_tui.core.allocation import Allocation

    store.set_state("cnn-2", JobState.RUNNING, 10.0)
    store.record_allocation(Allocation.of("cnn-2", "T4", {"h": [0]}), 1, 10.0, store.job("cnn-2").job.spec)
    store.add_observation("cnn-2", "T4", "1", 300.0, 11.0, "profiling")
    store.add_observation("cnn-2", "T4", "1", 812.5, 20.0, "running")
    assert main([*state, "jobs", "--json"]) == 0
    rows = {j["id"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert (rows["cnn-2"]["samples_per_s"], rows["cnn-2"]["samples_per_s_at"]) == (812.5, 20.0)
    # relaunched on two GPUs: until it reports there, the one-GPU speed is not its speed
    store.release_allocation("cnn-2", 30.0)
    store.record_allocation(Allocation.of("cnn-2", "T4", {"h": [0, 1]}), 2, 31.0, store.job("cnn-2").job.spec)
    assert main([*state, "jobs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][-1]["samples_per_s"] is None
    assert main([*state, "jobs", "cnn-2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples_per_s"] is None, "as jobs --json lists it"
    store.add_observation("cnn-2", "T4", "2", 1500.0, 40.0, "running")
    assert main([*state, "jobs", "--json"]) == 0
    rows = {j["id"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert (rows["cnn-2"]["samples_per_s"], rows["cnn-2"]["samples_per_s_at"]) == (1500.0, 40.0)
    store.release_allocation("cnn-2", 50.0)
    store.record_allocation(Allocation.of("cnn-2", "T4", {"h": [0]}), 3, 51.0, store.job("cnn-2").job.spec)
    assert main([*state, "jobs", "--json"]) == 0
    rows = {j["id"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    # its GPUs as data, beside the "1xT4 on h[0]" text a script had to parse
    assert {k: rows["cnn-2"][k] for k in ("gpu_type", "num_gpus", "hosts")} == {"gpu_type": "T4", "num_gpus": 1,
                                                                                "hosts": {"h": [0]}}
    assert {k: rows["cnn"][k] for k in ("gpu_type", "num_gpus", "hosts")} == {"gpu_type": None, "num_gpus": 0,
                                                                              "hosts": {}}
    assert (rows["cnn"]["min_gpus"], rows["cnn"]["max_gpus"]) == tuple(map(int, rows["cnn"]["gpus"].split("-")))


def test_the_listing_says_which_host_holds_a_jobs_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checkpoint's path alone is no use to a script fetching it: hosts share no filesystem."""
    import time

    from heet_tui.control.checkpoint_hosts import CheckpointHosts
    from heet_tui.core.allocation import Allocation

    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    store = Store(tmp_path / "state")
    store.update_progress("cnn", 40, 1280.0, "/w/ck/cnn", 5.0)
    CheckpointHosts(store, time.time).remember("cnn", "gpu-b")
    capsys.readouterr()
    assert main([*state, "jobs", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["jobs"][0]
    assert (row["checkpoint"], row["checkpoint_host"]) == ("/w/ck/cnn", "gpu-b")
    store.set_state("cnn", JobState.RUNNING, 10.0)
    store.record_allocation(Allocation.of("cnn", "T4", {"gpu-c": [0]}), 1, 10.0, store.job("cnn").job.spec)
    store.add_observation("cnn", "T4", "1", 812.5, 20.0, "running")
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["checkpoint_host"] == "gpu-c", "rank 0's host writes the next one"
    assert shown["profiling"] == {"runs": 0, "gpu_s": 0.0}
    assert (shown["samples_per_s"], shown["samples_per_s_at"]) == (812.5, 20.0), "as jobs --json lists it"


def test_a_failed_jobs_whole_message_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    why = "rank 0 on gpu1 ended with exit code 2 (4 attempts); last log line: can't open file 'train.py'"
    Store(tmp_path / "state").set_state("cnn", JobState.FAILED, at=1.0, message=why)
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["cnn", "failed"] and lines[1].endswith("…")  # cut in the table
    assert len(lines[1]) == 100, "the message takes what the terminal has left"
    assert f"cnn: {why}" in lines  # and whole below it
    monkeypatch.setenv("COLUMNS", "220")  # a wide terminal: the table holds it, said once
    assert main([*state, "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith(why) and not any(line.startswith("cnn: ") for line in lines)
    monkeypatch.delenv("COLUMNS")  # piped (to grep, a file): whole, at any length
    assert main([*state, "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith(why) and not any(line.startswith("cnn: ") for line in lines)
    # 60 columns: no room beside the row, so the message goes under it (forced to 30 characters past
    # the edge, every row wrapped: "MES" / "SAGE")
    monkeypatch.setenv("COLUMNS", "60")
    assert main([*state, "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "MESSAGE" not in lines[0] and lines[1].split()[:2] == ["cnn", "failed"], lines
    assert lines[2].startswith("    rank 0 on gpu1 ended") and all(len(line) <= 60 for line in lines[:3]), lines


def test_bad_input_is_a_located_message_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(JOB.replace("batch_size = 32", "batch_size = 0"))
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "job.toml:4" in err and "batch_size" in err
    assert main([*state, "cancel", "nope"]) == 2, "a --state with no store in it is not made by a cancel"
    assert f"no state store in {tmp_path / 'state'}: nothing was submitted with this --state" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()
    # a drain before the first run makes one, and says so: a mistyped --state drained nothing real
    hosts = tmp_path / "h.toml"
    hosts.write_text('[[hosts]]\nname = "h"\ntransport = "local"\n')
    assert main([*state, "hosts", "drain", "nope", "--hosts", str(hosts)]) == 2
    assert 'no host named "nope"' in capsys.readouterr().err and not (tmp_path / "state").exists(), \
        "a refused drain makes no store"
    assert main([*state, "hosts", "drain", "h", "--hosts", str(hosts)]) == 0
    assert f"(a new state store in {tmp_path / 'state'}: no controller has run on it yet)" in capsys.readouterr().err
    assert main([*state, "cancel", "nope"]) == 2
    assert 'no job "nope"' in capsys.readouterr().err
    assert main([*state, "--hosts", str(tmp_path / "missing.toml"), "run", "--until-idle"]) == 2
    assert "missing.toml: file not found" in capsys.readouterr().err
    assert main([*state, "jobs", "--events", "5"]) == 2  # ignored without a job
    assert "--events N shows one job's latest N events: give the job" in capsys.readouterr().err
    # a --state that is a file, or empty ("$UNSET": it used the real queue), is an input error: exit 2
    (tmp_path / "afile").write_text("")
    assert main(["jobs", "--state", str(tmp_path / "afile")]) == 2
    assert f"--state {tmp_path / 'afile'}: is not a directory" in capsys.readouterr().err
    assert main(["submit", str(tmp_path / "job.toml"), "--state", ""]) == 2
    assert "--state is empty (an unset variable?)" in capsys.readouterr().err
    assert main(["jobs", "--hosts", " ", *state]) == 2  # the same for --hosts (it fell back to the remembered one)
    assert "--hosts is empty (an unset variable?)" in capsys.readouterr().err
    assert main(["hosts", "list", "--hosts", ""]) == 2  # `hosts` keeps it elsewhere: it listed the default file
    assert "--hosts is empty (an unset variable?)" in capsys.readouterr().err
    assert main([*state, "jobs", "a", "--events", "0"]) == 2  # "the latest 1"; then "give the job", given
    err = capsys.readouterr().err
    assert "--events 0: N is how many of the job's latest events to show, 1 or more" in err and "give the job" not in err


def test_a_job_cannot_take_over_another_jobs_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Submitting the same example twice: the second job would have overwritten the first's
    # checkpoints while both lived, or resumed from its finished one and stopped at step 0.
    spec = tmp_path / "job.toml"
    spec.write_text(JOB + 'checkpoint_dir = "~/ckpt/cnn"\n')
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    assert main([*state, "submit", str(spec)]) == 2
    err = capsys.readouterr().err
    line = spec.read_text().splitlines().index('checkpoint_dir = "~/ckpt/cnn"') + 1
    assert f'{spec}:{line}: job "cnn": key "checkpoint_dir": "~/ckpt/cnn" is in use by job cnn (queued)' in err
    store = Store(tmp_path / "state")
    store.set_state("cnn", JobState.RUNNING, 1.0)
    store.update_progress("cnn", 10, 320, "~/ckpt/cnn/last.pt")
    store.set_state("cnn", JobState.DONE, 2.0)
    assert main([*state, "submit", str(spec)]) == 2
    assert "already past this job's target: it would resume there and stop without training" in capsys.readouterr().err
    # Training on from where the finished job stopped is what a larger target asks for.
    longer = tmp_path / "longer.toml"
    longer.write_text(JOB.replace("steps = 10", "steps = 20") + 'checkpoint_dir = "~/ckpt/cnn/"\n')
    assert main([*state, "submit", str(longer), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "cnn-2", "name": "cnn", "state": "queued",
                                                   "resubmitted": True, "resumes_from": "cnn"}
    assert [r.job.id for r in Store(tmp_path / "state").jobs()] == ["cnn", "cnn-2"]


def test_state_and_hosts_may_follow_the_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``heet-tui submit job.toml --state st`` is how people type it; argparse alone refused it."""
    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    after, before = str(tmp_path / "after"), str(tmp_path / "before")
    assert main(["submit", str(spec), "--state", after]) == 0
    assert main(["--state", before, "submit", str(spec)]) == 0
    assert main(["--state", before, "submit", str(spec), "--state", after]) == 0  # the later one wins
    assert [r.job.id for r in Store(after).jobs()] == ["cnn", "cnn-2"]
    assert [r.job.id for r in Store(before).jobs()] == ["cnn"]
    capsys.readouterr()
    assert main(["jobs", "--json", "--state", after]) == 0
    assert [j["id"] for j in json.loads(capsys.readouterr().out)["jobs"]] == ["cnn", "cnn-2"]
    assert main(["cancel", "cnn-2", "--state", after]) == 0
    assert Store(after).job("cnn-2").job.state is JobState.CANCELLED
    assert main(["run", "--until-idle", "--state", after, "--hosts", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: file not found" in capsys.readouterr().err


def test_submit_says_when_a_job_shares_measurements_with_earlier_ones(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec, other = tmp_path / "job.toml", tmp_path / "other.toml"
    spec.write_text(JOB)
    other.write_text(JOB.replace('model = "m"', 'model = "n"'))
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0 and main([*state, "submit", str(other)]) == 0
    assert "share" not in capsys.readouterr().out
    assert main([*state, "submit", str(spec)]) == 0
    assert main([*state, "submit", str(spec)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "note: model m at batch 32, as cnn and 1 more: they share throughput measurements (a new model key keeps "
        "it apart)")


def test_heet_tui_run_says_a_plans_result_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plan's result is an event and a notice; once notices were printed too, it came twice."""
    from control_lab import kill_local_jobs, write_job, write_local_hosts

    hosts = write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)])
    state = ["--state", str(tmp_path / "state"), "--hosts", str(hosts)]
    assert main(["submit", str(write_job(tmp_path, "a", steps=20, max_gpus=1)), *state[:2]]) == 0
    try:
        assert main(["run", "--until-idle", "--auto-approve", "--interval", "0.3", "--no-profile", *state]) == 0
    finally:
        kill_local_jobs(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    results = [line for line in lines if "plan #1: 1 step(s) done" in line]
    assert len(results) == 1, lines


def test_submit_warns_of_gpu_types_no_host_declares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo ("V100" on a cluster of A100s) left the job waiting, with nothing said at submit time."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[[hosts]]\nname = "a"\ntransport = "local"\nemulate = { gpu_type = "A100", count = 2 }\n'
                     '[[hosts]]\nname = "t"\ntransport = "local"\nemulate = { gpu_type = "T4", count = 1 }\n')
    state = ["--state", str(tmp_path / "state"), "--hosts", str(hosts)]
    spec = tmp_path / "job.toml"
    spec.write_text(JOB + 'gpu_types = ["V100"]\n')
    assert main([*state, "submit", str(spec)]) == 0
    out = capsys.readouterr().out
    assert f"warning: no host in {hosts} declares a GPU type in gpu_types ['V100'] (they declare A100, T4)" in out
    spec.write_text(JOB + 'gpu_types = ["V100", "a100"]\n')  # one of them is there (any case)
    assert main([*state, "submit", str(spec), "--json"]) == 0
    assert "warning" not in json.loads(capsys.readouterr().out)
    spec.write_text(JOB + 'gpu_types = ["A10O", "T4"]\n')  # a look-alike typo beside a type that is there
    assert main([*state, "submit", str(spec)]) == 0
    assert f'warning: gpu_types names types no host in {hosts} declares: "A10O": did you mean "A100"?' in \
        capsys.readouterr().out
    hosts.write_text(hosts.read_text() + '[[hosts]]\nname = "real"\naddress = "10.0.0.9"\n')  # type known on connect
    spec.write_text(JOB.replace('"cnn"', '"cnn3"') + 'gpu_types = ["V100"]\n')
    assert main([*state, "submit", str(spec)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_the_listing_keeps_to_active_jobs_and_the_latest_ended_unless_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lab's store holds thousands of ended jobs; `heet-tui jobs` printed every one of them."""
    from heet_tui.cli.commands.jobs import SHOWN_ENDED
    from heet_tui.config.job_spec import load_job_spec

    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    store = Store(tmp_path / "state")
    store.add_jobs([load_job_spec(spec)] * (SHOWN_ENDED + 6), 1.0)
    ids = [r.job.id for r in store.jobs()]
    for job_id in ids[:-1]:
        store.set_state(job_id, JobState.CANCELLED, 2.0, "cancelled")
    state = ["--state", str(tmp_path / "state")]
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = [line.split()[0] for line in out[1:] if line.startswith("cnn")]
    assert listed == ids[5:], "the active job and the latest ended ones"
    assert "... and 5 older ended job(s): heet-tui jobs --all lists them" in out
    assert main([*state, "jobs", "--all", "--json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [j["id"] for j in everything["jobs"]] == ids and everything["ended_not_listed"] == 0


def test_a_jobs_output_reaches_the_terminal_with_its_control_characters_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job printing an OSC 52 sequence could set the clipboard of whoever read its events."""
    from heet_tui.cli.printable import printable

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("esc", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.add_event(1.0, "failed", "crashed\n\x1b]52;c;ZXZpbA==\x07\x1b]0;PWNED\x07 tail\tline", "esc")
    assert main(["--state", str(tmp_path / "state"), "jobs", "esc"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]52;c;ZXZpbA==\\x07" in out
    assert printable("a\tb\x9bc") == "a\tb\\x9bc", "tab kept; a C1 control escaped too"
    # the spec's own command: an escape in an argument retitled the window, a newline broke the layout
    store.add_job(JobSpec("args", ("python3", "t.py", "\x1b]0;PWNTITLE\x07", "a\nb"), "m", 32,
                          Target(TargetKind.STEPS, 10), workdir="/w/ev\ndir"), 0.0)
    assert main(["--state", str(tmp_path / "state"), "jobs", "args"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;PWNTITLE\\x07" in out and "'a\\nb'" in out, out
    assert "(in /w/ev\\ndir)" in out, "a path's newline too"


def test_an_old_jobs_age_is_in_days() -> None:
    """"2160h" for a job 90 days old, which `jobs NAME` called "90d00h ago"."""
    from heet_tui.cli.commands.jobs import _age

    assert [_age(s) for s in (59, 600, 7200, 47 * 3600, 90 * 86400)] == ["59s", "10m", "2h", "47h", "90d"]


def test_the_table_shows_a_job_spread_over_many_hosts_in_a_short_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16-GPU job over five hosts made the ALLOCATION column 300 characters wide for every row
    (three terminal lines per job at 100 columns); --json and jobs NAME keep every GPU."""
    from heet_tui.core.allocation import Allocation

    monkeypatch.setenv("COLUMNS", "200")
    spec = tmp_path / "job.toml"
    spec.write_text(JOB)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(spec)]) == 0
    store = Store(tmp_path / "state")
    spread = Allocation.of("cnn", "T4", {f"t4-0{i}": [0, 1, 2] if i == 1 else [0, 1, 2, 3] for i in range(1, 6)})
    # and its message as the controller sets it: it named every host and GPU again after the short cell
    store.set_state("cnn", JobState.RUNNING, 10.0, f"running on {spread.describe()}")
    store.record_allocation(spread, 1, 10.0, store.job("cnn").job.spec)
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "19xT4 on 5 hosts: t4-01, t4-02, +3" in row and "[" not in row, row
    assert row.endswith("running on 19xT4 on 5 hosts: t4-01, t4-02, +3"), row
    assert main([*state, "jobs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["allocation"] == spread.describe()


def test_an_allocation_on_one_or_two_hosts_is_shown_whole() -> None:
    from heet_tui.cli.commands.jobs import table_allocation
    from heet_tui.core.allocation import Allocation

    two = Allocation.of("j", "A100", {"a": [0, 1], "b": [0, 1]}).describe()
    assert table_allocation(two) == two == "4xA100 on a[0,1],b[0,1]"
    assert table_allocation(None) == "-"


def test_priorities_show_in_the_table_where_any_job_has_one_and_always_in_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Why ann's job ran while bob's waited was said nowhere but in jobs NAME."""
    state = ["--state", str(tmp_path / "state")]
    plain, urgent = tmp_path / "bob.toml", tmp_path / "ann.toml"
    plain.write_text(JOB.replace('"cnn"', '"bob"'))
    assert main([*state, "submit", str(plain)]) == 0
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    assert "PRIO" not in capsys.readouterr().out, "no job has one: no column"
    urgent.write_text(JOB.replace('"cnn"', '"ann"') + "priority = 5\n")
    assert main([*state, "submit", str(urgent)]) == 0
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    head, *rows = capsys.readouterr().out.splitlines()
    at = head.index("PRIO")
    assert {r.split()[0]: r[at:].split()[0] for r in rows[:2]} == {"bob": "0", "ann": "5"}
    assert main([*state, "jobs", "--json"]) == 0
    assert {j["id"]: j["priority"] for j in json.loads(capsys.readouterr().out)["jobs"]} == {"bob": 0, "ann": 5}


