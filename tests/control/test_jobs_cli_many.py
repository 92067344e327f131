"""``heet-tui submit`` and ``cancel`` with several specs or names (a sweep).

Seen: ``heet-tui submit sweep/*.toml`` was refused ("unrecognized arguments"), so a sweep was a
shell loop, which queued the first six specs of a sweep whose seventh had a typo.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.control.store import Store
from heet_tui.core.job import JobState


def _spec(root: Path, name: str, extra: str = "", model: str = "m") -> Path:
    path = root / f"{name}.toml"
    path.write_text(f'name = "{name}"\ncommand = ["python3", "-m", "train"]\nmodel = "{model}"\nbatch_size = 32\n'
                    f"target = {{ steps = 10 }}\n{extra}")
    return path


def test_a_sweep_is_queued_whole_or_not_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    good = [_spec(tmp_path, f"lr{i}") for i in range(3)]
    typo = _spec(tmp_path, "lr3", "min_gpus = 0\n")
    assert main([*state, "submit", *map(str, good), str(typo)]) == 2
    err = capsys.readouterr().err
    assert "lr3.toml:6" in err and "min_gpus" in err and "nothing submitted: 1 of the 4 specs cannot be queued" in err
    assert Store(tmp_path / "state").jobs() == [], "the good specs were not queued either"
    assert main([*state, "submit", str(tmp_path)]) == 2, "the same four given as their directory"
    assert "nothing submitted: 1 of the 4 specs cannot be queued" in capsys.readouterr().err
    # The fourth reuses the second's checkpoint directory: refused in the same transaction.
    ckpt = 'checkpoint_dir = "~/ckpt/shared"\n'
    clash = [_spec(tmp_path, "a"), _spec(tmp_path, "b", ckpt), _spec(tmp_path, "c"), _spec(tmp_path, "d", ckpt)]
    assert main([*state, "submit", *map(str, clash)]) == 2
    err = capsys.readouterr().err
    line = clash[3].read_text().splitlines().index(ckpt.strip()) + 1
    assert f'{clash[3]}:{line}: job "d": key "checkpoint_dir": "~/ckpt/shared" is the checkpoint_dir of job b of ' \
           "this submit too" in err, "file, line, job and key, as a spec's other problems are said; b was never queued"
    assert "nothing submitted" in err and Store(tmp_path / "state").jobs() == []
    assert main([*state, "submit", *map(str, good), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["lr0", "lr1", "lr2"], "one JSON object per job"
    assert main([*state, "submit", *map(str, good)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"submitted lr{i}-2 (1 GPU, target 10 steps)" for i in range(3)]
    assert out[3:] == ["note: lr0, lr1, lr2 were submitted before: these are lr0-2, lr1-2, lr2-2",
                       "note: model m at batch 32, as lr0 and 2 more: lr0-2, lr1-2, lr2-2 share throughput "
                       "measurements (a new model key keeps one apart)"], "one note for the class, not three"


def test_a_sweeps_warnings_are_said_once_naming_the_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[[hosts]]\nname = "a"\ntransport = "local"\nemulate = { gpu_type = "A100", count = 2 }\n')
    state = ["--state", str(tmp_path / "state"), "--hosts", str(hosts)]
    v100 = 'gpu_types = ["V100"]\n'
    specs = [_spec(tmp_path, "x", v100, "p"), _spec(tmp_path, "y", "", "q"), _spec(tmp_path, "z", v100, "r")]
    assert main([*state, "submit", *map(str, specs)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning")]
    assert warnings == [f"warning (x, z): no host in {hosts} declares a GPU type in gpu_types ['V100'] (they "
                        "declare A100): the job waits until a host of such a type is added"]


def test_cancel_takes_several_names_and_patterns_and_a_miss_cancels_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    specs = [_spec(tmp_path, n) for n in ("sweep-a", "sweep-b", "sweep-c", "other")]
    assert main([*state, "submit", *map(str, specs)]) == 0
    store = Store(tmp_path / "state")
    store.set_state("sweep-c", JobState.CANCELLED, 1.0)
    capsys.readouterr()
    assert main([*state, "cancel", "sweep-*", "nope"]) == 2
    assert 'no job "nope" (active jobs: sweep-a, sweep-b, other); nothing cancelled' in capsys.readouterr().err
    assert main([*state, "cancel", "x*"]) == 2
    assert not any(r.cancel_requested for r in store.jobs()), "a miss cancels nothing"
    assert main([*state, "cancel", "sweep-*", "sweep-a", "other"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["cancelled sweep-a", "cancelled sweep-b", "cancelled other"], "each once; ended jobs left out"
    assert {r.job.id: r.job.state for r in store.jobs()} == {n: JobState.CANCELLED for n in
                                                             ("sweep-a", "sweep-b", "sweep-c", "other")}


def test_the_tuis_submit_takes_a_directory_or_a_glob_whole_or_not_at_all(tmp_path: Path) -> None:
    """The TUI asks for one path; a sweep's directory or glob is queued as heet-tui submit does."""
    import asyncio

    from control_lab import write_local_hosts

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller, ControllerOptions
    from heet_tui.core.intents import SubmitJob

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name in ("lr3", "lr1", "lr2"):
        _spec(sweep, name)
    (sweep / "notes.txt").write_text("not a job")
    store = Store(tmp_path / "state")
    ctl = Controller(load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)])), store, ControllerOptions())

    async def submit(path: str) -> str:
        return await ctl.intents.handle(SubmitJob(path))

    assert asyncio.run(submit(str(sweep))) == "submitted lr1, lr2, lr3"
    assert asyncio.run(submit(str(sweep / "lr[12].toml"))) == "submitted lr1-2, lr2-2"
    _spec(sweep, "lr4", "min_gpus = 0\n")
    with pytest.raises(ValueError, match=r"lr4.toml:\d+: .*min_gpus.*; nothing submitted"):
        asyncio.run(submit(str(sweep)))
    with pytest.raises(ValueError, match="no job files"):
        asyncio.run(submit(str(tmp_path / "nothing-*.toml")))
    assert [r.job.id for r in store.jobs()] == ["lr1", "lr2", "lr3", "lr1-2", "lr2-2"]
    grid = _spec(tmp_path, "grid", '[sweep]\nseed = [1, 2]\n').read_text().replace('"train"', '"train", "{seed}"')
    (tmp_path / "grid.toml").write_text(grid)  # a [sweep] file from the TUI's prompt, as from the shell
    assert asyncio.run(submit(str(tmp_path / "grid.toml"))) == "submitted grid-seed1, grid-seed2"


def test_a_name_means_its_active_job_to_cancel_and_update_and_its_ended_one_to_retry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    spec = _spec(tmp_path, "cnn")
    assert main([*state, "submit", str(spec)]) == 0
    store = Store(tmp_path / "state")
    store.set_state("cnn", JobState.RUNNING, 1.0)
    store.set_state("cnn", JobState.DONE, 2.0)
    assert main([*state, "submit", str(spec)]) == 0  # the same spec again: cnn-2
    assert "note: cnn was submitted before: this one is cnn-2" in capsys.readouterr().out
    spec.write_text(spec.read_text() + "max_gpus = 4\n")
    assert main([*state, "update", str(spec)]) == 0, capsys.readouterr().err
    assert "updated cnn-2" in capsys.readouterr().out and store.job("cnn-2").job.spec.max_gpus == 4
    assert main([*state, "cancel", "cnn"]) == 0
    assert capsys.readouterr().out.splitlines() == ["cancelled cnn-2"], "not 'cnn is already done'"
    store.set_state("cnn", JobState.DONE, 3.0)
    assert main([*state, "retry", "cnn"]) == 0
    assert capsys.readouterr().out.startswith("cnn-2 queued again"), "the cancelled one, not the done one"


def test_a_directory_of_job_files_is_submitted_as_in_the_tui(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _spec(sweep, "b"), _spec(sweep, "a")
    assert main([*state, "submit", str(sweep)]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["submitted a (1 GPU, target 10 steps)",
                                                        "submitted b (1 GPU, target 10 steps)"]
    (tmp_path / "empty").mkdir()
    assert main([*state, "submit", str(tmp_path / "empty")]) == 2
    assert "no job files (*.toml) in" in capsys.readouterr().err
    # one the user may not read ("submit /root" as an ordinary user) was said to hold no job files;
    # root reads everything, so the system's answer to an ordinary user is played here
    import os

    real_access = os.access
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(sweep) else real_access(p, mode, **kw))
        patch.setattr(Path, "glob", lambda self, pattern: iter(()))
        assert main([*state, "submit", str(sweep)]) == 2
    assert f"cannot read {sweep}: permission denied" in capsys.readouterr().err
    # or a directory above the glob's that cannot be entered (its own is then not even seen)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(sweep) else real_access(p, mode, **kw))
        real_exists = os.path.exists
        patch.setattr(os.path, "exists", lambda p: False if str(p).startswith(str(sweep) + "/") else real_exists(p))
        assert main([*state, "submit", str(sweep / "deeper" / "*.toml")]) == 2
    assert f"cannot read {sweep}: permission denied" in capsys.readouterr().err
    # a quoted glob the shell left alone, as the TUI's n takes it ("file not found" here before)
    _spec(sweep, "c")
    assert main([*state, "submit", str(sweep / "[c]*.toml")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "submitted c (1 GPU, target 10 steps)"
    assert main([*state, "submit", str(sweep / "nothing*.toml")]) == 2
    assert "no job files (*.toml) in" in capsys.readouterr().err


def test_two_bad_files_of_one_name_are_told_apart_by_their_paths(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`submit a/job.toml b/job.toml`, both bad: two identical "job.toml:4:" lines."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _spec(tmp_path / "a", "job", "min_gpus = 0\n")
    second = _spec(tmp_path / "b", "job", "min_gpus = 0\n")
    other = _spec(tmp_path, "solo", "min_gpus = 0\n")
    assert main(["--state", str(tmp_path / "state"), "submit", str(first), str(second), str(other)]) == 2
    err = capsys.readouterr().err
    assert f"{first}:6: " in err and f"{second}:6: " in err
    assert "\nsolo.toml:6: " in err, "a name that says which file stays short"


def test_specs_named_alike_in_one_submit_are_not_said_to_be_resubmitted(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    for folder in "abc":
        (tmp_path / folder).mkdir()
        _spec(tmp_path / folder, "same")
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", *(str(tmp_path / f / "same.toml") for f in "abc")]) == 0
    out = capsys.readouterr().out
    assert "note: several specs here are named same: they are same, same-2, same-3" in out
    assert "before" not in out, "none was submitted before"
    assert main([*state, "submit", str(tmp_path / "a" / "same.toml")]) == 0
    assert "note: same was submitted before: this one is same-4" in capsys.readouterr().out


def test_what_submit_prints_of_a_spec_holds_no_terminal_sequences(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Its own warning printed a script path's OSC 0 raw (the terminal was retitled); a right-to-left
    mark in an error reversed the rest of the line."""
    spec = tmp_path / "evil.toml"
    spec.write_text('name = "evil"\nscript = "x\\u001b]0;TITLE\\u0007\\u202e.py"\nmodel = "m"\nbatch_size = 32\n'
                    "target = { steps = 10 }\n")
    assert main(["--state", str(tmp_path / "state"), "submit", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "\\x1b]0;TITLE\\x07\\u202e.py" in out and "\x1b" not in out and "\u202e" not in out, out
    spec.write_text('name = "evil"\ncommand = ["python3"]\nmodel = "m\\u202e"\nbatch_size = 32\ntarget = { steps = 10 }\n')
    assert main(["--state", str(tmp_path / "state"), "submit", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "m\\u202e" in err and "\u202e" not in err, err


def test_one_checkpoint_dir_spelt_two_ways_is_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"/tmp/y/../y/ck" and "//x" were queued beside "/tmp/y/ck" and "/x": two jobs writing one folder."""
    state = ["--state", str(tmp_path / "state")]
    for first, second in (("/ck/a", "/ck/b/../a/"), ("/x", "//x")):
        one = _spec(tmp_path, "one", f'checkpoint_dir = "{first}"\n')
        two = _spec(tmp_path, "two", f'checkpoint_dir = "{second}"\n')
        assert main([*state, "submit", str(one), str(two)]) == 2
        assert "is the checkpoint_dir of job one of this submit too" in capsys.readouterr().err
    assert main([*state, "submit", str(_spec(tmp_path, "none")), str(_spec(tmp_path, "other"))]) == 0, \
        "no checkpoint_dir is no clash"
