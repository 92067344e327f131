"""Job specs: the bundled examples load; mistakes are reported with file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from heet_tui.config.errors import ConfigError
from heet_tui.config.job_hints import missing_files_hint, size_hint, workdir_hint
from heet_tui.config.job_spec import load_job_spec, parse_job_text
from heet_tui.core.job import TargetKind


def test_bundled_example_jobs_load(repo: Path) -> None:
    specs = [load_job_spec(p) for p in sorted((repo / "examples" / "jobs").glob("*.toml"))]
    assert [s.name for s in specs] == ["loader-mlp", "small-cnn", "t4-only", "wide-cnn"]
    for spec in specs:
        assert spec.min_gpus <= spec.max_gpus
        script = Path(spec.workdir) / spec.command[1]
        expected = "loader_training.py" if spec.name == "loader-mlp" else "training.py"
        assert script.resolve() == (repo / "examples" / expected).resolve()


BASE = 'name = "j"\nscript = "train.py"\nmodel = "cifar10"\nbatch_size = 64\ntarget = { steps = 10 }\n'


def test_script_and_args_become_argv(tmp_path: Path) -> None:
    spec = parse_job_text(BASE + 'args = ["--lr", "0.1"]\nworkdir = "sub"\n', tmp_path / "job.toml")
    assert spec.command == ("python3", "train.py", "--lr", "0.1")
    assert spec.workdir == str((tmp_path / "sub").resolve())
    assert spec.target.kind is TargetKind.STEPS and spec.target.value == 10


@pytest.mark.parametrize("key", ["name", "model"])
def test_a_name_that_ends_in_a_newline_is_refused(tmp_path: Path, key: str) -> None:
    text = BASE.replace('name = "j"', 'name = "j\\n"') if key == "name" else BASE.replace('"cifar10"', '"cifar10\\n"')
    with pytest.raises(ConfigError) as info:
        parse_job_text(text, tmp_path / "job.toml")
    assert f'key "{key}": "' in str(info.value) and '\\n" is not' in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("max_gpus = 0\n", 'job.toml:6: job "j": key "max_gpus": 0 is out of range'),
        ("min_gpus = 4\nmax_gpus = 2\n", 'job.toml:7: job "j": key "max_gpus": 2 is less than min_gpus (4)'),
        ("batchsize = 3\n", 'job.toml:6: job "j": unknown key "batchsize" (did you mean "batch_size"?)'),
        ('command = ["x"]\n', 'give either "command" or "script"'),
        ('env = { RANK = "3" }\n', '"RANK" is set by heet-tui for each launch'),
        ('env = { CUDA_DEVICE_ORDER = "FASTEST_FIRST" }\n', '"CUDA_DEVICE_ORDER" is set by heet-tui for each launch'),
        ('env = { X = 1 }\n', 'value of "X" must be a string (in quotes), not int 1'),
        ("priority = 1.5\n", 'key "priority": expected an integer, got 1.5'),
        # it read "got datetime.date(1979, 5, 27)"; a key given twice named no key
        ("priority = 1979-05-27\n", 'got the date or time 1979-05-27 (TOML reads it unquoted as one)'),
        ('model = "other"\n', "job.toml:6: TOML syntax error: Cannot overwrite a value (column 16): a key given twice "
                              "('model = \"other\"')"),
        ('gpu_types = "T4"\n', 'key "gpu_types": expected a list of strings'),
        # it meant "every type", as the hosts file refuses gpus = [] for leaving no GPU
        ("gpu_types = []\n", 'job.toml:6: job "j": key "gpu_types": [] allows no GPU type; leave the key out'),
        # a regex "$" takes a final newline: the name was accepted, broke the CLI's lines and every
        # launch was refused by the agent
        ('env = { "KEY\\n" = "1" }\n', 'key "env": "KEY\\n" is not a valid environment variable name'),
        # accepted, shown as "wants 1-99999999999999999999" and planned around; 10**30 steps overflowed the store
        ("max_gpus = 99999999999999999999\n", 'key "max_gpus": 99999999999999999999 is out of range (expected from 1 to 65536)'),
        ("priority = -9223372036854775808\n", 'key "priority": -9223372036854775808 is out of range'),
        ("stall_timeout = 99999999999\n", 'key "stall_timeout": 99999999999 is out of range'),
    ],
)
def test_bad_job_specs(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_job_text(BASE + extra, tmp_path / "job.toml")
    assert expected in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ('name = "j"\nscript = "t.py"\nmodel = "m"\nbatch_size = 8\n', 'missing required key "target"'),
        (BASE.replace("{ steps = 10 }", "{ steps = 10, epochs = 2 }"), "give exactly one of epochs, steps, samples"),
        (BASE.replace("{ steps = 10 }", "{ epochs = 2 }"), 'needs "dataset_samples"'),
        (BASE.replace("batch_size = 64", 'batch_size = "64"'), 'key "batch_size": expected an integer, got "64"'),
        (BASE.replace('name = "j"', 'name = "a b"'), 'key "name": "a b" is not a valid job name'),
        # "-x" was refused as not "letters, digits, . _ -", which it is
        (BASE.replace('name = "j"', 'name = "-x"'), '"-x" is not a valid job name (ASCII letters, digits, . _ -, '
                                                    'starting with a letter or digit)'),
        # "cnn-ü" was refused as not "letters, digits, . _ -", and ü is a letter
        (BASE.replace('name = "j"', 'name = "cnn-ü"'), '"cnn-ü" is not a valid job name (ASCII letters, digits'),
        (BASE.replace('name = "j"', f'name = "{"x" * 97}"'), 'key "name": 97 characters; at most 96'),
        (BASE.replace("{ steps = 10 }", "{ steps = 2.5 }"), 'key "steps": expected a whole number of steps, got 2.5'),
        (BASE.replace("{ steps = 10 }", "{ samples = 100.5 }"), 'expected a whole number of samples, got 100.5'),
        # a NUL passed every check and failed at launch, as a crash retried twice
        (BASE + 'env = { FOO = "a\\u0000b" }\n', 'value of "FOO" must be a string without NUL characters'),
        (BASE + 'checkpoint_dir = "/ck\\u0000x"\n', 'key "checkpoint_dir": contains a NUL character'),
        (BASE + 'args = ["--x\\u0000"]\n', 'contains a NUL character'),
        # an 8 MB command was accepted, then "no reply to launch within 30 s", retried for ever
        (BASE + f'args = ["{"x" * 300_000}"]\n', "the command is 300,015 bytes, more than the 262,144 a launch"),
        # accepted, then refused at every launch ("command not found: python3" and a line break)
        (BASE.replace('script = "train.py"', 'command = [""]'), 'key "command": \'\' is not a program name or path'),
        (BASE.replace('script = "train.py"', 'command = ["python3\\nx"]'), "'python3\\nx' is not a program name"),
        (BASE.replace('script = "train.py"', 'script = "train\\n.py"'), "key \"script\": 'train\\n.py' is not a"),
    ],
)
def test_incomplete_job_specs(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_job_text(text, tmp_path / "job.toml")
    assert expected in str(info.value), str(info.value)


def test_whole_targets_may_be_written_as_floats_and_epochs_may_be_fractional(tmp_path: Path) -> None:
    assert parse_job_text(BASE.replace("{ steps = 10 }", "{ steps = 1e6 }"), tmp_path / "j.toml").target.value == 1e6
    epochs = BASE.replace("{ steps = 10 }", "{ epochs = 2.5 }") + "dataset_samples = 1000\n"
    assert parse_job_text(epochs, tmp_path / "j.toml").target.value == 2.5


def test_submit_warns_when_the_script_beside_the_job_file_needs_a_workdir(tmp_path: Path) -> None:
    # Seen: a job beside its train.py, without workdir, crashed four times with "can't open file
    # '<agent dir>/train.py'" before anyone said why.
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.toml"
    hint = workdir_hint(parse_job_text(BASE, path), path)
    assert hint is not None and '"train.py" is beside job.toml' in hint and 'workdir = "."' in hint
    assert workdir_hint(parse_job_text(BASE + 'workdir = "."\n', path), path) is None
    elsewhere = parse_job_text(BASE.replace('script = "train.py"', 'script = "other.py"'), path)
    hint = workdir_hint(elsewhere, path)  # a misspelt name, or a file the hosts do not have there: it failed 3 times
    assert hint is not None and hint.startswith('"other.py" is not beside job.toml, and with no "workdir"')
    absolute = parse_job_text(BASE.replace('script = "train.py"', f'script = "{tmp_path}/x.py"'), path)
    assert workdir_hint(absolute, path) is None


def test_gpu_types_match_whatever_their_case(tmp_path: Path) -> None:
    # "a100" in a hand-written spec left the job waiting for a type no host reports.
    from heet_tui.core.sched_input import JobView

    spec = parse_job_text(BASE + 'gpu_types = ["a100", "rtx2080ti"]\n', tmp_path / "job.toml")
    assert spec.allows("A100") and spec.allows("RTX2080Ti") and not spec.allows("T4")
    view = JobView("j", 1, 1, lambda t, p: 1.0, gpu_types=spec.gpu_types)
    assert view.allows("A100") and not view.allows("T4")


CMD = 'name = "j"\nmodel = "cifar10"\nbatch_size = 64\ntarget = { steps = 10 }\ncommand = [%s]\n'


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('"torchrun", "--nproc_per_node=4", "train.py", "--lr", "0.1"',
         'job.toml:5: job "j": key "command": torchrun starts a process per GPU itself, and so does heet-tui'),
        ('"/opt/conda/bin/torchrun", "--nnodes", "2", "train.py"', 'command = ["python", "train.py"]'),
        ('"python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py", "-x"',
         'python -m torch.distributed.run starts a process per GPU itself'),
        ('"accelerate", "launch", "--multi_gpu", "train.py"', 'accelerate launch starts a process per GPU itself'),
        ('"mpirun", "-np", "4", "./a.out"', 'command = ["python", "train.py", ...]'),
        # behind a wrapper, they got through
        ('"/usr/bin/env", "OMP_NUM_THREADS=1", "torchrun", "train.py"', 'torchrun starts a process per GPU itself'),
        ('"uv", "run", "torchrun", "train.py"', 'command = ["python", "train.py"]'),
        ('"nice", "-n", "10", "python", "-m", "torch.distributed.launch", "t.py"', 'python -m torch.distributed.launch'),
        ('"bash", "-c", "torchrun --nproc_per_node 2 train.py"', 'torchrun starts a process per GPU itself'),
    ],
)
def test_a_command_run_by_a_distributed_launcher_is_refused_with_the_command_to_use(
        tmp_path: Path, command: str, expected: str) -> None:
    """heet-tui starts a process per GPU itself: under torchrun each of them started a launcher of
    its own (N launchers racing for one rendezvous, or N copies of the training)."""
    with pytest.raises(ConfigError) as info:
        parse_job_text(CMD % command, tmp_path / "job.toml")
    assert expected in str(info.value), str(info.value)
    if "--lr" in command:
        assert 'command = ["python", "train.py", "--lr", "0.1"]' in str(info.value)


def test_commands_that_only_look_like_launchers_are_accepted(tmp_path: Path) -> None:
    for command in ('"python", "train.py", "--launcher", "torchrun"', '"python", "-m", "mypkg.train"',
                    '"accelerate-config-check"', '"python", "-m"', '"env"', '"bash", "-c", "echo \'unclosed"',
                    '"uv", "run", "python", "train.py"'):
        assert parse_job_text(CMD % command, tmp_path / "job.toml").command[0]


def test_submit_notes_a_script_that_reports_no_progress(tmp_path: Path) -> None:
    """A user's own script without progress lines runs unmeasured; they learnt it only from the job list."""
    from heet_tui.config.job_hints import progress_hint

    path = tmp_path / "job.toml"
    (tmp_path / "train.py").write_text("import torch\nprint('epoch 1 loss 0.3')\n")
    spec = parse_job_text(BASE + 'workdir = "."\n', path)
    assert "train.py neither uses heet_agent.elastic nor prints @heet-progress lines" in (progress_hint(spec, path) or "")
    (tmp_path / "train.py").write_text("from heet_agent import elastic\n")
    assert progress_hint(spec, path) is None
    (tmp_path / "train.py").write_text("print('@heet-progress ' + json.dumps(d))\n")
    assert progress_hint(spec, path) is None
    (tmp_path / "train.py").unlink()
    assert progress_hint(spec, path) is None, "a script it cannot read says nothing (workdir_hint covers it)"


def test_submit_warns_of_a_workdir_or_script_this_machine_does_not_have(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    assert missing_files_hint(parse_job_text(BASE, path)) is None, "no workdir: the hosts' own directory"
    hint = missing_files_hint(parse_job_text(BASE + 'workdir = "."\n', path))
    assert hint == f'"train.py" is not in workdir {tmp_path} on this machine: every launch fails unless the hosts ' \
                   "have it there"
    (tmp_path / "train.py").write_text("print('hi')\n")
    assert missing_files_hint(parse_job_text(BASE + 'workdir = "."\n', path)) is None
    hint = missing_files_hint(parse_job_text(BASE + 'workdir = "nodir"\n', path))
    assert hint is not None and hint.startswith(f"workdir {tmp_path / 'nodir'} does not exist on this machine")


def test_submit_warns_of_a_min_gpus_more_than_the_hosts_declare(tmp_path: Path) -> None:
    from heet_tui.config.hosts_file import parse_hosts_text

    hosts = parse_hosts_text('[[hosts]]\nname = "a"\nemulate = { gpu_type = "A100", count = 2, speed = 1.0 }\n\n'
                             '[[hosts]]\nname = "t"\ngpu_type = "T4"\ngpus = [0, 1, 2, 3]\n', tmp_path / "hosts.toml")
    path = tmp_path / "job.toml"
    assert size_hint(parse_job_text(BASE + "min_gpus = 4\nmax_gpus = 8\n", path), hosts) is None
    # 6 GPUs in all, but a job runs on one type: 6 never fit (the total was compared)
    hint = size_hint(parse_job_text(BASE + "min_gpus = 6\nmax_gpus = 8\n", path), hosts)
    assert hint == (f"min_gpus = 6 is more than the hosts in {tmp_path / 'hosts.toml'} declare of any one GPU type "
                    "(4 T4, 2 A100), and a job runs on one type: it waits until more are added")
    hint = size_hint(parse_job_text(BASE + 'min_gpus = 3\nmax_gpus = 3\ngpu_types = ["A100"]\n', path), hosts)
    assert hint is not None and "any one GPU type (2 A100)" in hint
    counted = parse_hosts_text('[[hosts]]\nname = "n"\n', tmp_path / "h2.toml")  # NVML counts them at connect
    assert size_hint(parse_job_text(BASE + "min_gpus = 64\nmax_gpus = 64\n", path), counted) is None


def test_a_pipe_or_a_link_loop_is_refused_not_waited_on(tmp_path: Path) -> None:
    """`submit fifo.toml` waited for ever; a link to itself ended in a traceback."""
    import os

    from heet_tui.config.job_spec import load_job_spec

    fifo, loop = tmp_path / "fifo.toml", tmp_path / "loop.toml"
    os.mkfifo(fifo)
    loop.symlink_to(loop)
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_job_spec(fifo)
    with pytest.raises(ConfigError, match="cannot read it: Too many levels of symbolic links"):
        load_job_spec(loop)


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    """A valid spec padded with 200 MB of comment took 15 s and 450 MB, and was queued."""
    from heet_tui.config.errors import MAX_CONFIG_BYTES
    from heet_tui.config.job_spec import load_job_spec

    huge = tmp_path / "huge.toml"
    huge.write_text(BASE + "#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match=r"huge.toml: .*huge.toml is over 4 MiB: not a hand-written TOML file"):
        load_job_spec(huge)
    huge.write_text(BASE + "#" * (MAX_CONFIG_BYTES - len(BASE) - 10) + "\n")
    assert load_job_spec(huge).name, "a file just under the bound is read"


def test_the_script_checked_at_submit_is_the_one_python_runs(tmp_path: Path) -> None:
    """A script in a directory with a space was skipped (taken for a "bash -c" string), and the
    "*.py" among its arguments was reported missing instead, while a typo in it went unsaid."""
    project = tmp_path / "my proj ü"
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.toml"

    def spec(script: str, *args: str) -> str:
        quoted = ", ".join(f'"{a}"' for a in args)
        return (BASE.replace('script = "train.py"\n', f'script = "{script}"\nargs = [{quoted}]\n')
                + 'workdir = "."\n')

    assert missing_files_hint(parse_job_text(spec("my proj ü/train.py", "--glob", "*.py"), path)) is None
    hint = missing_files_hint(parse_job_text(spec("my proj ü/trian.py", "*.py"), path))
    assert hint is not None and hint.startswith('"my proj ü/trian.py" is not in workdir')


def test_toml_nested_too_deep_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """A thousand nested arrays raised RecursionError from submit, hosts list and the live reload."""
    from heet_tui.config.hosts_file import load_hosts

    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 1000 + "]" * 1000 + "\n")
    for load in (load_job_spec, load_hosts):
        with pytest.raises(ConfigError, match="nested too deep to read"):
            load(path)


@pytest.mark.parametrize(("line", "expected"), [
    ("batch_size = 99999999999999999999", 'key "batch_size": 99999999999999999999 is out of range'),
    ("target = { steps = 1e300 }", 'key "steps": 1e+300 steps is beyond any real job'),
    ("target = { steps = 1000000000000001 }", 'key "steps": 1,000,000,000,000,001 steps is beyond any real job (at most '
                                              '1,000,000,000,000,000)'),
])
def test_sizes_beyond_any_real_job_are_refused(tmp_path: Path, line: str, expected: str) -> None:
    text = BASE.replace("batch_size = 64", line) if "batch" in line else BASE.replace("target = { steps = 10 }", line)
    with pytest.raises(ConfigError) as info:
        parse_job_text(text, tmp_path / "job.toml")
    assert expected in str(info.value), str(info.value)


def test_a_relative_checkpoint_dir_is_refused(tmp_path: Path) -> None:
    """It was kept as written and meant another folder on each host, wherever the run started."""
    from heet_tui.config.job_spec import parse_job_text

    with pytest.raises(ConfigError, match=r'j.toml:6: job "j": key "checkpoint_dir": "rel/ckpt" is relative'):
        parse_job_text(BASE + 'checkpoint_dir = "rel/ckpt"\n', tmp_path / "j.toml")
    for fine in ("/ckpt/j", "~/ckpt/j"):
        assert parse_job_text(BASE + f'checkpoint_dir = "{fine}"\n', tmp_path / "j.toml").checkpoint_dir == fine
    for relative in ("~ck", "~root/ck"):  # no user "ck": left as written, relative to the run's folder
        with pytest.raises(ConfigError, match=f'"{relative}" is relative'):
            parse_job_text(BASE + f'checkpoint_dir = "{relative}"\n', tmp_path / "j.toml")
    for whole in ("/", "~", "//", "~/"):
        with pytest.raises(ConfigError, match="is a whole filesystem or home folder"):
            parse_job_text(BASE + f'checkpoint_dir = "{whole}"\n', tmp_path / "j.toml")


def test_a_spec_another_user_made_or_anyone_may_write_is_refused(tmp_path: Path) -> None:
    """Another user's b.toml in a shared sticky directory was queued by `submit '/tmp/sweep/*.toml'`
    and ran their command as the submitter."""
    import os

    spec = tmp_path / "b.toml"
    spec.write_text('name = "b"\ncommand = ["/bin/sh", "-c", "id"]\nmodel = "m"\nbatch_size = 8\n'
                    "target = { steps = 10 }\n")
    assert load_job_spec(spec).name == "b"
    spec.chmod(0o666)
    with pytest.raises(ConfigError, match="refused: every user can write it, and its command would run as you"):
        load_job_spec(spec)
    spec.chmod(0o644)
    if os.getuid() != 0:
        return  # giving a file to another user takes root
    os.chown(spec, 65534, 65534)
    with pytest.raises(ConfigError, match=r"refused: it is owned by .*uid 65534.*, not by you"):
        load_job_spec(spec)
