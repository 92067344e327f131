"""`heet-tui run` restarted (an upgrade, a reboot) keeps what was set: auto-approve was written
"off" by every run without --auto-approve, and the queue waited for approvals again."""

from __future__ import annotations

import json
from pathlib import Path

from control_lab import write_local_hosts

from heet_tui.cli.main import main
from heet_tui.control.store import Store


def test_auto_approve_stays_as_last_set_until_a_run_says_otherwise(tmp_path: Path) -> None:
    where = ["--hosts", str(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])), "--state", str(tmp_path / "state")]

    def remembered() -> bool:
        return json.loads(Store(tmp_path / "state").setting("auto_approve") or "false")

    assert main(["run", "--until-idle", "--auto-approve", "--no-profile", *where]) == 0
    assert remembered()
    assert main(["run", "--until-idle", "--no-profile", *where]) == 0
    assert remembered(), "a restart without the flag keeps it"
    assert main(["run", "--until-idle", "--no-auto-approve", "--no-profile", *where]) == 0
    assert not remembered()


def test_until_idle_exits_1_only_for_a_job_that_failed_in_this_run(tmp_path: Path) -> None:
    """A job that failed in an earlier run made every later `run --until-idle` exit 1, with nothing
    queued at all: a CI step that reuses its state dir stayed red for good."""
    from control_lab import write_job

    from heet_tui.core.job import JobState

    where = ["--hosts", str(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])), "--state", str(tmp_path / "state")]
    failing = write_job(tmp_path, "bad", steps=10, max_gpus=1, command=["python3", "-c", "raise SystemExit(3)"])
    assert main(["submit", str(failing), *where[2:]]) == 0
    assert main(["run", "--until-idle", "--auto-approve", "--no-profile", "--interval", "0.2", *where]) == 1
    assert Store(tmp_path / "state").job("bad").job.state is JobState.FAILED
    assert main(["run", "--until-idle", "--no-profile", "--interval", "0.2", *where]) == 0, "nothing failed now"


def test_the_closing_summary_counts_this_runs_jobs(tmp_path: Path, capsys) -> None:
    """"controller stopped: 13 done" after one job ran: it counted the store's whole history."""
    from control_lab import write_job

    where = ["--hosts", str(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])), "--state", str(tmp_path / "state")]
    failing = write_job(tmp_path, "bad", steps=10, max_gpus=1, command=["python3", "-c", "raise SystemExit(3)"])
    assert main(["submit", str(failing), *where[2:]]) == 0
    assert main(["run", "--until-idle", "--auto-approve", "--no-profile", "--interval", "0.2", *where]) == 1
    assert "controller stopped: 0 done, 1 failed, 0 cancelled in this run, 0 still active" in capsys.readouterr().out
    assert main(["run", "--until-idle", "--no-profile", "--interval", "0.2", *where]) == 0
    assert "controller stopped: 0 done, 0 failed, 0 cancelled in this run, 0 still active" in capsys.readouterr().out


def test_the_gain_threshold_is_remembered_for_every_controller_of_the_store(tmp_path: Path, capsys) -> None:
    """`run --gain-threshold 0.3` held for that run only: the TUI's controller and the next `run`
    auto-approved at 5% again."""
    import pytest

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller

    hosts = write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])
    where = ["--hosts", str(hosts), "--state", str(tmp_path / "state")]

    def threshold() -> float:
        return Controller(load_hosts(hosts), Store(tmp_path / "state")).opt.gain_threshold

    assert threshold() == 0.05, "never set: 5%"
    assert main(["run", "--until-idle", "--no-profile", "--gain-threshold", "0.3", *where]) == 0
    assert threshold() == 0.3
    assert main(["run", "--until-idle", "--no-profile", *where]) == 0
    assert threshold() == 0.3, "a later run without it keeps it"
    with pytest.raises(SystemExit) as refused:  # remembered, nan would have held every plan for good
        main(["run", "--until-idle", "--no-profile", "--gain-threshold", "nan", *where])
    assert refused.value.code == 2
    assert threshold() == 0.3
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:  # meant as 5%: 500%, remembered for every later controller
        main(["run", "--until-idle", "--no-profile", "--gain-threshold", "5", *where])
    assert refused.value.code == 2
    assert "argument --gain-threshold: '5' is not a fraction from 0 to 1 (0.05 is 5%)" in capsys.readouterr().err
    assert threshold() == 0.3, "not remembered"
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "gain this fraction (default: as last set, else 0.05: 5%)" in said, said


def test_until_idle_says_why_jobs_wait_when_nothing_runs_or_is_proposed(tmp_path: Path, monkeypatch) -> None:
    """A job no host could ever hold kept a nightly `run --until-idle` waiting for good, saying nothing."""
    from control_lab import write_job

    from heet_tui.cli.commands import run

    where = ["--hosts", str(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])), "--state", str(tmp_path / "state")]
    big = write_job(tmp_path, "big", steps=10, max_gpus=5)
    big.write_text(big.read_text().replace("min_gpus = 1", "min_gpus = 5"))
    assert main(["submit", str(big), *where[2:]]) == 0
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if " waiting " in line:
            raise KeyboardInterrupt  # seen: stop the run here (it would wait for good)

    monkeypatch.setattr(run, "STUCK_SAY_S", 0.5)
    monkeypatch.setattr(run, "_say", say)
    assert main(["run", "--until-idle", "--auto-approve", "--no-profile", "--interval", "0.2", *where]) == 130
    line = next(x for x in said if " waiting " in x)
    assert "big: " in line and "(--until-idle waits for it)" in line and "5" in line, line
