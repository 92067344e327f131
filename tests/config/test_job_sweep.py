"""A ``[sweep]`` table: one job file, one job per combination of its values (config/job_sweep.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.config.errors import ConfigError
from heet_tui.config.job_spec import parse_job_file, parse_job_text
from heet_tui.control.store import Store

BASE = ('name = "cnn"\nscript = "train.py"\nargs = ["--lr", "{lr}", "--seed", "{seed}"]\nmodel = "cifar10"\n'
        'batch_size = 64\ntarget = { steps = 10 }\nenv = { RUN = "lr{lr}" }\n')


def test_every_combination_is_a_job_with_its_values_written_in(tmp_path: Path) -> None:
    text = BASE + 'checkpoint_dir = "/ckpt/cnn-{lr}-{seed}"\n\n[sweep]\nlr = [0.01, 1e-05]\nseed = [1, 2]\n'
    specs = parse_job_file(text, tmp_path / "sweep.toml")
    assert [s.name for s in specs] == ["cnn-lr0.01-seed1", "cnn-lr0.01-seed2", "cnn-lr1e-05-seed1",
                                       "cnn-lr1e-05-seed2"]
    assert specs[2].command == ("python3", "train.py", "--lr", "1e-05", "--seed", "1"), "floats as typed, not rounded"
    assert specs[3].checkpoint_dir == "/ckpt/cnn-1e-05-2" and dict(specs[0].env) == {"RUN": "lr0.01"}
    assert {(s.model, s.batch_size) for s in specs} == {("cifar10", 64)}, "one profile class: profiled once"


def test_a_name_with_keys_is_kept_and_a_whole_value_keeps_its_type(tmp_path: Path) -> None:
    text = (BASE.replace('name = "cnn"', 'name = "bs{bs}-lr{lr}-s{seed}"').replace("batch_size = 64", 'batch_size = "{bs}"')
            + "[sweep]\nlr = [0.1]\nseed = [7]\nbs = [32, 128]\n")
    specs = parse_job_file(text, tmp_path / "sweep.toml")
    assert [(s.name, s.batch_size) for s in specs] == [("bs32-lr0.1-s7", 32), ("bs128-lr0.1-s7", 128)]
    assert parse_job_text(BASE.replace("{lr}", "0.1").replace("{seed}", "1"), tmp_path / "one.toml").name == "cnn"
    with pytest.raises(ConfigError, match="a sweep of 2 jobs where one job was expected"):
        parse_job_text(text, tmp_path / "sweep.toml")


@pytest.mark.parametrize(("sweep", "message"), [
    # a typo runs all alike; said where the placeholder is written
    ("lr = [0.1]\n", "sweep.toml:3: {seed} is no sweep key (the [sweep] table has lr)"),
    ("lr = [0.1]\nseed = []\n", 'sweep.toml:11: sweep key "seed": expected a non-empty list of strings or numbers'),
    ("lr = 0.1\nseed = [1]\n", 'sweep.toml:10: sweep key "lr": expected a non-empty list'),
    ("lr = [[0.1]]\nseed = [1]\n", 'sweep.toml:10: sweep key "lr": expected a non-empty list'),
    ("lr = [0.1, 0.1]\nseed = [1]\n", 'sweep.toml:10: sweep key "lr": a value is listed twice'),
    ("lr = [0.1]\nseed = [1]\nunused = [1, 2]\n", 'sweep.toml:12: sweep key "unused" appears in no value: write {unused}'),
    ("lr = [0.1]\nseed = [1]\n'a b' = [1]\n", 'sweep.toml:9: sweep key "a b": use letters, digits and _'),
    ("lr = [0.1, 0.2]\nseed = " + str(list(range(501))) + "\n", "sweep.toml:9: the sweep makes 1002 jobs; at most 1000"),
    ("lr = [0.1]\nseed = ['a b']\n", 'job "cnn-lr0.1-seeda b"'),  # not a valid job name: said for the job
])
def test_a_bad_sweep_is_refused_naming_the_file_and_line(tmp_path: Path, sweep: str, message: str) -> None:
    """Each key's problem on its own line: all were said on the [sweep] header's."""
    with pytest.raises(ConfigError) as err:
        parse_job_file(BASE + "\n[sweep]\n" + sweep, tmp_path / "sweep.toml")
    assert message in str(err.value)


def test_jobs_that_would_share_a_name_or_a_checkpoint_dir_are_refused(tmp_path: Path) -> None:
    named = BASE.replace('name = "cnn"', 'name = "cnn-{lr}"') + "[sweep]\nlr = [0.1]\nseed = [1, 2]\n"
    with pytest.raises(ConfigError, match='sweep.toml:1: the sweep names two jobs "cnn-0.1": put every sweep key'):
        parse_job_file(named, tmp_path / "sweep.toml")
    shared = BASE + 'checkpoint_dir = "/ckpt/cnn"\n[sweep]\nlr = [0.1, 0.2]\nseed = [1]\n'
    with pytest.raises(ConfigError, match="sweep.toml:8: jobs of the sweep would share a checkpoint_dir"):
        parse_job_file(shared, tmp_path / "sweep.toml")


def test_heet_tui_submit_queues_a_sweep_file_whole_or_not_at_all(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    good, bad = tmp_path / "sweep.toml", tmp_path / "typo.toml"
    good.write_text(BASE + "[sweep]\nlr = [0.01, 0.1]\nseed = [1, 2]\n")
    bad.write_text(BASE + "[sweep]\nlr = [0.01]\n")
    assert main([*state, "submit", str(good), str(bad)]) == 2
    assert "typo.toml:3: {seed} is no sweep key" in capsys.readouterr().err
    assert Store(tmp_path / "state").jobs() == []
    assert main([*state, "submit", str(good)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [f"submitted cnn-lr{lr}-seed{seed} (1 GPU, target 10 steps)"
                       for lr in ("0.01", "0.1") for seed in (1, 2)]
    assert out[4].startswith("note: model cifar10 at batch 64: cnn-lr0.01-seed1, cnn-lr0.01-seed2 and 2 more share")
    store = Store(tmp_path / "state")
    assert [e.message for e in store.events() if e.kind == "submit"][-1].endswith(f"from {good}")


def test_the_bundled_sweep_example_loads(repo: Path) -> None:
    from heet_tui.config.job_spec import load_job_file

    specs = load_job_file(repo / "examples" / "sweeps" / "lr-seed.toml")
    assert len(specs) == 6 and specs[-1].name == "small-cnn-lr0.3-seed2"
    assert specs[-1].command[-4:] == ("--lr", "0.3", "--seed", "2")
    assert (Path(specs[0].workdir) / specs[0].command[1]).resolve() == (repo / "examples" / "training.py").resolve()
