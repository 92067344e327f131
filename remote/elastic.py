"""Elastic training under heet-tui without the plumbing: ``from heet_agent import elastic``.

Every job heet-tui starts can import this module: the agent that launches the job appends its
own directory to the job's ``PYTHONPATH``, so the helper matches the agent and nothing has to be
installed on the hosts (installing heet-tui provides it for runs by hand). It does what
docs/TRAINING.md asks of a script that is resized, moved and fenced, so that a plain PyTorch
loop needs a handful of lines (docs/TRAINING.md, "The quick way", shows the loop).

Why each piece is here:

* ``step_done`` does one all-reduce per step (loss, "asked to stop", step time, "checkpoint
  due"), so every rank ends on the same step, saves together and sleeps the same emulation
  delay. A rank that decided alone would leave its peers blocked in a collective.
* The global batch stays fixed across sizes and ``samples`` counts it across restarts:
  ``batch_sampler`` (or a script that picks the batch from ``run.samples`` alone) gives a step
  the same samples at any world size.
  ``shard`` splits a batch the size does not divide unevenly, and ``loss_scale`` (world / batch)
  turns each rank's *summed* loss into a gradient equal to the global-batch mean under DDP.
* Checkpoints record the launch generation (``HEET_GENERATION``). A new launch claims the
  directory before it loads; a copy of an older generation (left running on a host that was
  unreachable) then refuses to write and exits 3, so it cannot overwrite the newer run's work.
  Files are written to a temporary name and renamed, under a lock shared with other copies.
* On hosts that declare emulated GPUs (``HEET_EMULATED_SPEED``) a step is taken to need its CPU
  time / speed plus what it waited on other than a CPU (``step_clock.py``); it is paced to that
  and reported so. Not wall time, so that other emulated GPUs sharing the cores do not change
  what this one measures.
* ``exit`` leaves the process group on every rank together and ends the process without the
  interpreter's finalisation, where gloo's threads can abort a finished run (SIGABRT).

Python 3.8 syntax: the agent bundle is unpacked on hosts whatever their Python.
"""

import atexit
import json
import os
import signal
import sys
import time

from heet_agent.elastic_checkpoint import CHECKPOINT_NAME, claim, rank_zeros, save_owned
from heet_agent.elastic_data import BatchSampler, WorkerInit, end_workers, ignore_sigterm  # noqa: F401 (ignore_sigterm: for users)
from heet_agent.elastic_env import ElasticError, env_number, target_steps_from_env  # noqa: F401 (ElasticError: for users)
from heet_agent.progress import PREFIX
from heet_agent.step_clock import StepClock

EXIT_DONE, EXIT_FENCED, EXIT_STOPPED = 0, 3, 143
RESERVED = frozenset(("step", "samples", "samples_per_s", "loss", "epoch", "checkpoint", "checkpoint_s", "world_size"))


def start(batch_size=None, target_steps=None, checkpoint_dir=None, checkpoint_every=0,
          checkpoint_interval_s=600.0, report_every=10, dataset_samples=None, name=None):
    """Read the launch's environment, join the process group and catch SIGTERM.

    Arguments left out come from the job spec through the environment: ``HEET_BATCH_SIZE``,
    ``HEET_TARGET_STEPS`` / ``_SAMPLES`` / ``_EPOCHS`` (with ``HEET_DATASET_SAMPLES``) and
    ``HEET_CHECKPOINT_DIR``. Checkpoints are written on a stop, at the target, every
    ``checkpoint_every`` steps (0: never by count) and every ``checkpoint_interval_s`` seconds
    (None: never by time), so a crash loses at most that much. With ``dataset_samples``
    (default ``HEET_DATASET_SAMPLES``) progress lines carry the epoch. ``name`` starts the
    messages the run writes to stderr (default: the script's file name).
    """
    run = ElasticRun(batch_size, target_steps, checkpoint_dir, checkpoint_every, checkpoint_interval_s,
                     report_every, dataset_samples, name or os.path.basename(sys.argv[0] or "training"))
    run._join()
    return run


class ElasticRun:
    """One launch of an elastic job: its place in the world, its progress, its checkpoints."""

    def __init__(self, batch_size, target_steps, checkpoint_dir, checkpoint_every, checkpoint_interval_s,
                 report_every, dataset_samples, name):
        self.name = name
        self.batch_size = batch_size if batch_size is not None else env_number("HEET_BATCH_SIZE", int)
        if self.batch_size is None or self.batch_size <= 0:
            raise ElasticError("no global batch size: pass batch_size= or set batch_size in the job spec")
        self.dataset_samples = (dataset_samples if dataset_samples is not None
                                else env_number("HEET_DATASET_SAMPLES", int))
        self.target_steps = (target_steps if target_steps is not None
                             else target_steps_from_env(self.batch_size, self.dataset_samples))
        if self.target_steps is None:
            raise ElasticError("no target: pass target_steps= or set target in the job spec")
        self.rank, self.local_rank = env_number("RANK", int, 0) or 0, env_number("LOCAL_RANK", int, 0) or 0
        self.world_size = env_number("WORLD_SIZE", int) or 1
        self.generation = env_number("HEET_GENERATION", int, 0) or 0
        if self.batch_size < self.world_size:
            raise ElasticError("global batch %d is smaller than world size %d" % (self.batch_size, self.world_size))
        directory = checkpoint_dir if checkpoint_dir is not None else os.environ.get("HEET_CHECKPOINT_DIR", "")
        self.checkpoint_dir = os.path.expanduser(str(directory)) if directory else None
        self.checkpoint_every = int(checkpoint_every or 0)
        self.checkpoint_interval_s = checkpoint_interval_s
        self.report_every = max(1, int(report_every))
        self.emulated_speed = env_number("HEET_EMULATED_SPEED", float)
        # a short measuring run, stopped after a few reports, whose checkpoints are thrown away: a
        # script skips its other outputs (results, final model, trackers) when this is set
        self.profiling = os.environ.get("HEET_PROFILING") == "1"
        self.step = 0
        self.samples = 0
        self.loss = None
        self.checkpoint = None  # the path of the last checkpoint this launch wrote
        self.checkpoint_s = None  # how long writing it took: heet-tui warns when a stop could not fit it
        self.device = None
        self._stop_asked = False
        self._code = None  # set once the run is over: done, stopped or fenced
        self._objects = {}
        self._saved_at = time.monotonic()
        self._restart_clock()

    @property
    def is_main(self):
        return self.rank == 0

    @property
    def running(self):
        """False once the target is reached, a stop was agreed, or a newer copy owns the directory."""
        if self._code is None and self.step >= self.target_steps:
            self._code = EXIT_DONE
        return self._code is None

    @property
    def loss_scale(self):
        """world / batch: times a rank's summed loss, DDP's averaged gradient is the global-batch mean."""
        return self.world_size / self.batch_size

    def shard(self, size=None):
        """This rank's part of a global batch of ``size`` (default: the run's), as a slice."""
        size = self.batch_size if size is None else size
        return slice(self.rank * size // self.world_size, (self.rank + 1) * size // self.world_size)

    def batch_sampler(self, dataset_size, seed=0, shuffle=True):
        """This rank's sample indices for every step left, for ``DataLoader(batch_sampler=...)``.

        Global step ``s`` always reads the same samples, whatever the world size: positions
        ``samples .. samples + batch`` of an endless sequence of epochs, each a permutation of the
        dataset drawn from ``seed`` and the epoch (or in order, without ``shuffle``), of which
        this rank takes its ``shard``. A DistributedSampler instead deals whole epochs out by
        world size and starts each launch at the epoch's beginning: after a resize the job would
        see other samples, and after every restart the start of the epoch again.
        It starts at the step the run is at when its batches are drawn (after ``resume``).
        """
        if dataset_size <= 0:
            raise ElasticError("dataset_size must be > 0, got %r" % (dataset_size,))
        return BatchSampler(dataset_size, seed, shuffle, lambda: self.samples, self.batch_size,
                            lambda: self.target_steps - self.step, self.shard())

    def data_loader(self, dataset, seed=0, shuffle=True, **kwargs):
        """A DataLoader of this rank's part of every global batch left (``batch_sampler``), whose
        workers ignore SIGTERM: heet-tui signals the whole process group to stop a job, a worker
        died of it, and the main process raised from inside its step before it could save. The
        workers exit on their own once the main process has gone. Other keywords go to the DataLoader.
        """
        from torch.utils.data import DataLoader

        try:
            size = len(dataset)
        except TypeError:  # an IterableDataset has no length, and no sample a step could be told to read
            raise ElasticError("data_loader needs a dataset with a length (map-style); with an iterable one, skip "
                               "the first run.samples samples and take run.shard() of each batch yourself")
        init = WorkerInit(kwargs.pop("worker_init_fn", None))
        return DataLoader(dataset, batch_sampler=self.batch_sampler(size, seed, shuffle),
                          worker_init_fn=init, **kwargs)

    def _join(self):
        import torch
        import torch.distributed as dist

        use_cuda = torch.cuda.is_available() and self.emulated_speed is None
        if use_cuda:
            self.device = torch.device("cuda", self.local_rank if self.local_rank < torch.cuda.device_count() else 0)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if self.world_size > 1:
            dist.init_process_group("nccl" if use_cuda else "gloo", rank=self.rank, world_size=self.world_size)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        atexit.register(self._at_interpreter_exit)
        self._restart_clock()

    def _on_sigterm(self, *_):
        self._stop_asked = True

    def _at_interpreter_exit(self):
        """A script that ends without ``exit()`` after a stop would exit 0, which heet-tui reads as
        "target reached": the job would be marked done part-way. It ends with the stop's code."""
        end_workers()
        if self._code in (EXIT_STOPPED, EXIT_FENCED):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(self._code)

    def _restart_clock(self):
        self._clock = StepClock(self.emulated_speed or 1.0)  # the step's start
        self._window = (time.perf_counter(), 0, 0.0)  # the report's: wall start, samples, emulated GPU seconds

    def wrap(self, model):
        """The model under DistributedDataParallel when the world has more than one rank."""
        if self.world_size == 1:
            return model
        import torch

        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        self._restart_clock()
        return wrapped

    def resume(self, **objects):
        """Claim the checkpoint directory for this generation and load the latest checkpoint.

        ``objects`` are what a checkpoint holds (the model, the optimizer, an LR scheduler: anything
        with ``state_dict`` / ``load_state_dict``). Returns True when a checkpoint was loaded. A copy
        whose generation is older than the directory's owner is stale: it says so and exits 3.
        """
        # A model passed already wrapped in DDP saves its keys as "module.*", which the same model
        # unwrapped (a launch at world size 1) cannot load: keep what it wraps.
        self._objects = {k: getattr(o, "module", o) if type(o).__name__ == "DistributedDataParallel" else o
                         for k, o in objects.items()}
        self._restart_clock()
        if self.checkpoint_dir is None:
            return False
        stale = self.is_main and not claim(self.checkpoint_dir, self.generation)
        if self._any_rank(stale):
            self._code = EXIT_FENCED
            if self.is_main:
                self._say_stale()
            self.exit()
        path = os.path.join(self.checkpoint_dir, CHECKPOINT_NAME)
        data = None
        if os.path.exists(path):
            import torch

            data = torch.load(path, map_location="cpu", weights_only=True)
        if self.world_size > 1:
            data = rank_zeros(data, self.world_size, self.device, self.is_main, self._say)
        if data is None:
            return False
        saved = data.get("objects", data)  # examples/training.py before this module kept them at the top
        for key, obj in self._objects.items():
            if key in saved:
                obj.load_state_dict(saved[key])
        self.step, self.samples, self.loss = int(data["step"]), int(data["samples"]), data.get("loss")
        if self.is_main:
            self._say("resumed from %s at step %d (world %d)" % (path, self.step, self.world_size))
            if self.step >= self.target_steps:
                # a copy ran on to the target while heet-tui did not watch (its host cut off): without
                # a line the run ends at once at the step heet-tui last saw, "done, short of its target"
                self._report({})
        self._restart_clock()
        return True

    def step_done(self, loss=None, **metrics):
        """Count one optimiser step of the global batch; report, checkpoint and pace it.

        Call it on every rank after each step. ``loss`` is this rank's and is averaged over the
        ranks; ``metrics`` (accuracy, lr, ...) are reported as rank 0 gives them.
        """
        if not self.running:
            raise ElasticError("step_done() after the run ended (check run.running)")
        taken = RESERVED.intersection(metrics)
        if taken:
            raise ElasticError("metrics may not be named %s: heet-tui sets them" % ", ".join(sorted(taken)))
        wall0, step_s = self._clock.wall0, self._clock.emulated_s()
        due = self.is_main and self._checkpoint_due_by_time()
        if hasattr(loss, "detach"):  # a loss tensor as it comes: float() of one that needs grad warns
            loss = loss.detach()
        values = [float(loss) if loss is not None else 0.0, 1.0 if self._stop_asked else 0.0, step_s, 1.0 if due else 0.0]
        if self.world_size > 1:
            import torch
            import torch.distributed as dist

            t = torch.tensor(values, dtype=torch.float64, device=self.device)
            dist.all_reduce(t)
            values = [float(v) for v in t.tolist()]
            values[0] /= self.world_size
            values[2] /= self.world_size
        loss_value, stopping, step_s, due = values[0], values[1] > 0, values[2], values[3] > 0
        gpu_s = 0.0
        if self.emulated_speed is not None:
            gpu_s = step_s
            time.sleep(max(0.0, gpu_s - (time.perf_counter() - wall0)))
        self.step += 1
        self.samples += self.batch_size
        self.loss = loss_value if loss is not None else None
        start, samples, emulated = self._window
        self._window = (start, samples + self.batch_size, emulated + gpu_s)
        done = self.step >= self.target_steps
        periodic = self.checkpoint_every > 0 and self.step % self.checkpoint_every == 0
        if self.checkpoint_dir is not None and (stopping or done or periodic or due):
            self._save()
        if self._code != EXIT_FENCED and self.is_main and (stopping or done or self.step % self.report_every == 0):
            self._report(metrics)
        if self._code is None and stopping and not done:
            self._code = EXIT_STOPPED
        self._clock.mark()

    def _checkpoint_due_by_time(self):
        interval = self.checkpoint_interval_s
        return self.checkpoint_dir is not None and interval is not None and time.monotonic() - self._saved_at >= interval

    def _save(self):
        fenced = False
        if self.is_main:
            import torch

            began = time.perf_counter()
            meta = {"step": self.step, "samples": self.samples, "loss": self.loss, "generation": self.generation}
            payload = dict(meta, objects={k: o.state_dict() for k, o in self._objects.items()})
            fenced = not save_owned(self.checkpoint_dir, self.generation, lambda fh: torch.save(payload, fh), meta)
            if fenced:
                self._say_stale()
            else:
                self.checkpoint = os.path.join(self.checkpoint_dir, CHECKPOINT_NAME)
                self.checkpoint_s = round(time.perf_counter() - began, 3)
        self._saved_at = time.monotonic()
        if self._any_rank(fenced):
            self._code = EXIT_FENCED

    def _report(self, metrics):
        start, samples, emulated = self._window
        elapsed = emulated if self.emulated_speed is not None else time.perf_counter() - start
        line = {"step": self.step, "samples": self.samples,
                "samples_per_s": round(samples / elapsed, 3) if elapsed > 0 else 0.0}
        if self.loss is not None:
            line["loss"] = float(f"{self.loss:.6g}")  # round(x, 5) reported a converged 3e-6 as 0
        if self.dataset_samples:
            line["epoch"] = round(self.samples / self.dataset_samples, 4)
        # a tensor or numpy scalar (accuracy.mean()) is not JSON: its number is
        line.update({k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()})
        line.update({"checkpoint": self.checkpoint, "world_size": self.world_size})
        if self.checkpoint_s is not None:
            line["checkpoint_s"] = self.checkpoint_s
        print(PREFIX + json.dumps(line), flush=True)
        self._window = (time.perf_counter(), 0, 0.0)

    def _any_rank(self, flag):
        if self.world_size == 1:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    @property
    def exit_code(self):
        """0 when the target was reached, 143 when stopped on request, 3 when fenced; None while running."""
        return None if self.running else self._code

    def exit(self, code=None):
        """Leave the process group on every rank together, then end the process with the run's code."""
        code = self.exit_code if code is None else code
        if code is None:
            raise ElasticError("exit() while the run is still going: pass a code, or stop the loop first")
        if self.world_size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                # A rank that tears down its gloo pairs while a peer still writes the checkpoint
                # can make that peer abort on its way out: everyone leaves together.
                dist.barrier()
                dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def _say(self, text):
        sys.stderr.write("%s: %s\n" % (self.name, text))
        sys.stderr.flush()

    def _say_stale(self):
        self._say("%s belongs to a newer generation; this copy is stale, exiting" % self.checkpoint_dir)
