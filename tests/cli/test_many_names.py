"""A lab's scale from the command line: a rack drained or undrained in one call, and a name not
found answered with a few close names, not every one (480 job names made one line of 8 KB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.config.job_spec import parse_job_text
from heet_tui.control.drains import drain_reasons
from heet_tui.control.store import Store


def _hosts(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text("".join(f'[[hosts]]\nname = "rack{r}-h{h:02d}"\ntransport = "local"\n'
                            f'emulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n\n'
                            for r in (1, 2, 3) for h in range(1, 11)))
    return path


def test_a_rack_is_drained_and_undrained_in_one_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--hosts", str(_hosts(tmp_path)), "--state", str(tmp_path / "state")]
    assert main(["hosts", "drain", "rack2-*", "rack3-h01", *where]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 11 and out[0] == "rack2-h01 drained: its jobs move at the next plan, or stop where no other host can hold them"
    store = Store(tmp_path / "state")
    drained = json.loads(store.setting("drained"))
    assert sorted(drained) == sorted([f"rack2-h{h:02d}" for h in range(1, 11)] + ["rack3-h01"])
    said = [e for e in store.events(limit=100) if e.kind == "drained"]  # who drained what, and when
    assert len(said) == 11 and said[0].message == "rack2-h01 drained by hand (heet-tui hosts drain)"
    assert drain_reasons(store)["rack3-h01"].startswith("drained by hand at ")

    assert main(["hosts", "drain", "rack1-h01", "rack9-*", *where]) == 2, "one name means nothing: none is drained"
    err = capsys.readouterr().err
    assert 'no host named "rack9-*" (30 hosts; closest: ' in err and err.endswith("; nothing changed\n")
    assert "rack1-h01" not in json.loads(Store(tmp_path / "state").setting("drained"))
    assert err.count("rack") < 12, "a few names, not thirty"

    assert main(["hosts", "undrain", "rack2-h0?", *where]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 9
    undrained = [e.message for e in Store(tmp_path / "state").events(limit=100) if e.kind == "undrained"]
    assert len(undrained) == 9 and "rack2-h01 back in service by hand (heet-tui hosts undrain)" in undrained
    assert sorted(json.loads(Store(tmp_path / "state").setting("drained"))) == ["rack2-h10", "rack3-h01"]


def test_a_job_name_not_found_is_answered_with_close_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path / "state")
    for i in range(1, 41):
        store.add_job(parse_job_text(f'name = "sweep-{i}"\ncommand = ["python3", "t.py"]\nmodel = "m"\n'
                                     "batch_size = 8\ntarget = { steps = 10 }\n", tmp_path / "j.toml"), float(i))
    assert main(["jobs", "sweep-4x", "--state", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert 'no job "sweep-4x" (40 active jobs; closest: sweep-4' in err, err
    assert err.count("sweep-") <= 9
    assert main(["jobs", "nosuchjob", "--state", str(tmp_path / "state")]) == 2
    assert 'no job "nosuchjob" (40 active jobs; none like it)' in capsys.readouterr().err, "not unrelated names"
    assert main(["cancel", "sweep-1", "swep-*", "--state", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert 'no job "swep-*" (40 active jobs; closest: ' in err and "nothing cancelled" in err


def test_a_pattern_that_names_only_jobs_in_other_states_says_so(tmp_path: Path, capsys) -> None:
    """Seen: `retry 'job-*'` when every job-* was done said `no job "job-*" (ended jobs: c1, c2)`."""
    from heet_tui.core.job import JobState

    store = Store(tmp_path / "state")
    for name in ("job-1", "job-2", "c1"):
        store.add_job(parse_job_text(f'name = "{name}"\ncommand = ["python3", "t.py"]\nmodel = "m"\n'
                                     "batch_size = 8\ntarget = { steps = 10 }\n", tmp_path / "j.toml"), 1.0)
    for name, state in (("job-1", JobState.DONE), ("job-2", JobState.DONE), ("c1", JobState.CANCELLED)):
        store.set_state(name, JobState.RUNNING if state is JobState.DONE else state, 2.0)
        if state is JobState.DONE:
            store.set_state(name, state, 3.0)
    # nothing to do, not a usage error: a nightly `retry 'sweep-*'` with nothing failed exited 2 (as a typo)
    assert main(["retry", "job-*", "--state", str(tmp_path / "state")]) == 0
    err = capsys.readouterr().err
    assert "job-*: its 2 job(s) are done: none to be retried" in err, err
    assert main(["cancel", "c?", "--state", str(tmp_path / "state")]) == 0
    assert "c?: its 1 job(s) are cancelled: none to be cancelled" in capsys.readouterr().err
    # one name given exactly, of a done job, still says what it is (retry refuses it)
    assert main(["retry", "job-1", "--state", str(tmp_path / "state")]) == 2
    capsys.readouterr()
    # beside a name that does mean a job, such a name is no typo: the rest goes on (`cancel 'h*' 'cnn-*'`
    # cancelled nothing, the cnn jobs having ended, and h* ran on)
    store.add_job(parse_job_text('name = "huge"\ncommand = ["python3", "t.py"]\nmodel = "m"\n'
                                 "batch_size = 8\ntarget = { steps = 10 }\n", tmp_path / "j.toml"), 4.0)
    assert main(["cancel", "h*", "job-*", "--state", str(tmp_path / "state")]) == 0
    assert "job-*: its 2 job(s) are done: none to be cancelled" in capsys.readouterr().err
    assert Store(tmp_path / "state").job("huge").job.state is JobState.CANCELLED
    assert main(["cancel", "job-*", "jbo-1", "--state", str(tmp_path / "state")]) == 2, "a typo still stops all"
    capsys.readouterr()
    # a name of nothing: the jobs retry could take are listed, not "ended jobs", which done ones are too
    assert main(["retry", "nosuch", "--state", str(tmp_path / "state")]) == 2
    assert 'no job "nosuch" (failed or cancelled jobs: c1, huge)' in capsys.readouterr().err


def test_jobs_only_lists_the_states_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """300 jobs of a sweep: the few failed ones were lines among hundreds, and only the latest 20
    ended jobs were listed at all."""
    from heet_tui.core.job import JobState

    store = Store(tmp_path / "state")
    for i in range(1, 61):
        job_id = store.add_job(parse_job_text(f'name = "sweep-{i}"\ncommand = ["python3", "t.py"]\nmodel = "m"\n'
                                              "batch_size = 8\ntarget = { steps = 10 }\n", tmp_path / "j.toml"),
                               float(i)).id
        if i <= 30:
            store.try_set_state(job_id, JobState.FAILED, float(i) + 0.5, "exit 1")
    where = ["--state", str(tmp_path / "state")]
    assert main(["jobs", "--only", "failed", "--json", *where]) == 0
    listed = json.loads(capsys.readouterr().out)["jobs"]
    assert len(listed) == 30 and {j["state"] for j in listed} == {"failed"}, "every failed job, not the latest 20"
    assert main(["jobs", "--only", "queued,running", *where]) == 0
    out = capsys.readouterr().out
    assert "sweep-31" in out and "sweep-1 " not in out and "older ended" not in out
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["jobs", "--only", "runing", *where])
    assert exited.value.code == 2
    assert "runing: not a job state (one or more of queued, profiling, running" in capsys.readouterr().err
    assert main(["jobs", "--only", "done", *where]) == 0
    assert capsys.readouterr().out.startswith("no done jobs in ")
