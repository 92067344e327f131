"""Elastic data-parallel training of a tiny CNN: checkpoint, stop on SIGTERM, resume at any world size.

This is the job heet-tui runs in its examples and end-to-end tests, and the reference for what
a training script must do to be resized: the controller stops it with SIGTERM and relaunches it
with another ``WORLD_SIZE``. Why each piece is here:

* The data is generated from the seed (CIFAR-sized 3x32x32 images, 10 classes: a class template
  plus noise), so every run and every rank sees the same samples without a download.
* The *global* batch is fixed and the sample order depends only on (seed, epoch), never on the
  world size: global step ``s`` always trains on the same samples, each rank taking its slice.
  With DDP's gradient averaging a resize therefore continues the same optimisation.
* Every step the ranks all-reduce a "stop requested" flag (with the loss), so on SIGTERM all of them agree on the
  last step; rank 0 then writes the checkpoint (temp file + ``os.replace``: a reader never sees
  half a file) and everyone exits with 143. Exit 0 means the target was reached.
* The checkpoint records the allocation generation (``HEET_GENERATION``); a process whose
  generation is older than the one on disk refuses to write (exit 3), so a stale copy on a host
  that came back after a move can never clobber the newer run's checkpoint. A new generation
  claims the directory before it loads (under a lock file), so a stale copy still running on an
  unreachable host is fenced from that moment, even if the new run has nothing left to train.
* ``HEET_EMULATED_SPEED`` makes a CPU host stand in for a GPU of that relative speed: a step is
  taken to need its CPU time / speed on the declared GPU; the step is paced to that (it sleeps)
  and the reported samples/s are computed from it. CPU time, not wall time: other processes
  competing for the same cores (other emulated GPUs on one machine) must not change what an
  emulated GPU measures.

Progress goes to stdout as ``@heet-progress {json}`` lines (rank 0 only). Backend: nccl when
CUDA is usable and the host is not emulated, gloo otherwise; no flag to change.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

CHECKPOINT_NAME = "checkpoint.pt"
META_NAME = "checkpoint.json"
LOCK_NAME = ".checkpoint.lock"
EXIT_DONE, EXIT_FENCED, EXIT_STOPPED = 0, 3, 143
NUM_CLASSES = 10


@dataclass
class Dist:
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("small-cnn", "wide-cnn"), default="small-cnn")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--steps", type=int, help="stop after this many global steps")
    target.add_argument("--samples", type=int, help="stop after this many samples")
    target.add_argument("--epochs", type=float, help="stop after this many passes over the dataset")
    p.add_argument("--batch-size", type=int, default=_env_int("HEET_BATCH_SIZE", 64),
                   help="global batch size, kept across resizes (default: $HEET_BATCH_SIZE or 64)")
    p.add_argument("--dataset-samples", type=int, default=_env_int("HEET_DATASET_SAMPLES", 2048),
                   help="samples per epoch (default: $HEET_DATASET_SAMPLES or 2048)")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", default=os.environ.get("HEET_CHECKPOINT_DIR", ""),
                   help="default: $HEET_CHECKPOINT_DIR; empty = no checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (0 = only on stop)")
    p.add_argument("--report-every", type=int, default=10, help="steps between progress lines")
    args = p.parse_args(argv)
    if args.steps is None and args.samples is None and args.epochs is None:
        # The controller passes the job.toml target this way; without one, a short default run.
        args.steps = _env_int("HEET_TARGET_STEPS", None)
        args.samples = _env_int("HEET_TARGET_SAMPLES", None)
        epochs = os.environ.get("HEET_TARGET_EPOCHS")
        args.epochs = float(epochs) if epochs else None
        if args.steps is None and args.samples is None and args.epochs is None:
            args.steps = 100
    for name in ("steps", "samples", "batch_size", "dataset_samples"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    return args


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        return int(float(raw))
    except ValueError:
        sys.exit(f"training.py: {name}={raw!r} is not a number")


def target_steps(args: argparse.Namespace) -> int:
    if args.steps is not None:
        return args.steps
    samples = args.samples if args.samples is not None else args.epochs * args.dataset_samples
    return max(1, math.ceil(samples / args.batch_size))


class SmallCnn(nn.Module):
    """Two conv layers and a linear head: small enough that a CPU step takes milliseconds."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.head = nn.Linear(2 * width * 8 * 8, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def build_model(name: str) -> nn.Module:
    return SmallCnn(8 if name == "small-cnn" else 24)


class SyntheticCifar:
    """CIFAR-shaped samples derived from the seed: class template + per-sample noise, made once up front."""

    def __init__(self, seed: int, size: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.templates = torch.randn(NUM_CLASSES, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, NUM_CLASSES, (size,), generator=g)
        self.images = self.templates[self.labels] * 0.5 + torch.randn(size, 3, 32, 32, generator=g)
        self.order_seed = seed * 7919 + 1
        self.size = size

    def order(self, epoch: int) -> torch.Tensor:
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.order_seed + epoch))

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[indices], self.labels[indices]

    def global_batch_indices(self, first_sample: int, batch: int) -> torch.Tensor:
        """Sample ids for global positions ``first_sample .. first_sample + batch``, across epochs."""
        out, pos = [], first_sample
        while len(out) < batch:
            epoch, offset = divmod(pos, self.size)
            take = min(batch - len(out), self.size - offset)
            out.extend(self.order(epoch)[offset: offset + take].tolist())
            pos += take
        return torch.tensor(out)


def setup_distributed() -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and emulated_speed() is None
    if use_cuda:
        device = torch.device("cuda", local_rank if local_rank < torch.cuda.device_count() else 0)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world)
    return Dist(rank, world, local_rank, device)


def emulated_speed() -> float | None:
    """The declared speed of the emulated GPU, or None on a real (or CPU-only) host."""
    raw = os.environ.get("HEET_EMULATED_SPEED", "")
    if not raw:
        return None
    try:
        speed = float(raw)
    except ValueError:
        sys.exit(f"training.py: HEET_EMULATED_SPEED={raw!r} is not a number")
    if not 0 < speed <= 1e6:
        sys.exit(f"training.py: HEET_EMULATED_SPEED={raw!r} must be > 0")
    return speed


def read_meta(ckpt_dir: Path) -> dict | None:
    try:
        return json.loads((ckpt_dir / META_NAME).read_text())
    except (OSError, ValueError):
        return None


def atomic_write(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def directory_lock(ckpt_dir: Path):
    """Serialises check-then-write between copies of the job (the fence must not race a save)."""
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    with open(ckpt_dir / LOCK_NAME, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def owned_by_newer(meta: dict | None, generation: int) -> bool:
    return meta is not None and int(meta.get("generation", -1)) > generation


def say_stale(ckpt_dir: Path) -> None:
    print(f"training.py: {ckpt_dir} belongs to a newer generation; this copy is stale, exiting",
          file=sys.stderr, flush=True)


def claim(ckpt_dir: Path, generation: int) -> bool:
    """Rank 0, before loading: record this generation as the directory's owner.

    Returns False when a newer generation already owns it (this copy is stale).
    """
    with directory_lock(ckpt_dir):
        meta = read_meta(ckpt_dir)
        if owned_by_newer(meta, generation):
            return False
        info = {"step": 0, "samples": 0, "loss": None} | (meta or {}) | {"generation": generation}
        atomic_write(ckpt_dir / META_NAME, lambda fh: fh.write(json.dumps(info).encode()))
    return True


def save_checkpoint(ckpt_dir: Path, model: nn.Module, opt: torch.optim.Optimizer, state: dict,
                    generation: int) -> bool:
    """Rank 0 only. Returns False (and writes nothing) when a newer generation owns the directory."""
    with directory_lock(ckpt_dir):
        if owned_by_newer(read_meta(ckpt_dir), generation):
            return False
        payload = {"model": model.state_dict(), "optimizer": opt.state_dict(), **state, "generation": generation}
        atomic_write(ckpt_dir / CHECKPOINT_NAME, lambda fh: torch.save(payload, fh))
        info = {k: state[k] for k in ("step", "samples", "loss")} | {"generation": generation}
        atomic_write(ckpt_dir / META_NAME, lambda fh: fh.write(json.dumps(info).encode()))
    return True


def load_checkpoint(ckpt_dir: Path, model: nn.Module, opt: torch.optim.Optimizer) -> dict | None:
    path = ckpt_dir / CHECKPOINT_NAME
    if not path.exists():
        return None
    data = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(data["model"])
    opt.load_state_dict(data["optimizer"])
    return data


def progress(payload: dict) -> None:
    print("@heet-progress " + json.dumps(payload), flush=True)


def agree(loss: float, stop_requested: bool, compute_s: float, d: Dist) -> tuple[float, bool, float]:
    """Mean loss and step time over ranks, and True on every rank if any rank was asked to stop.

    One all-reduce for all three, every step: the ranks end on the same step, the reported loss
    is the global batch's, and every rank sleeps the same emulation delay. (A rank that based its
    delay on its own step time would count the time it waited for a sleeping peer, sleep longer,
    and the ranks would slow each other down without bound.)
    """
    if d.world == 1:
        return loss, stop_requested, compute_s
    t = torch.tensor([loss, 1.0 if stop_requested else 0.0, compute_s], device=d.device, dtype=torch.float64)
    dist.all_reduce(t)
    return float(t[0].item()) / d.world, bool(t[1].item() > 0), float(t[2].item()) / d.world


def train(args: argparse.Namespace) -> int:
    d = setup_distributed()
    if args.batch_size < d.world:
        print(f"training.py: global batch {args.batch_size} is smaller than world size {d.world}", file=sys.stderr)
        return 2
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("requested", True))
    torch.manual_seed(args.seed)
    model = build_model(args.model).to(d.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    ckpt_dir = Path(args.checkpoint_dir).expanduser() if args.checkpoint_dir else None
    generation = int(os.environ.get("HEET_GENERATION", "0") or 0)
    state = {"step": 0, "samples": 0, "loss": None}
    if ckpt_dir is not None:
        if any_rank(d.is_main and not claim(ckpt_dir, generation), d):
            if d.is_main:
                say_stale(ckpt_dir)
            return leave(EXIT_FENCED, d)
        loaded = load_checkpoint(ckpt_dir, model, opt)
        if loaded is not None:
            state = {k: loaded[k] for k in state}
            if d.is_main:
                print(f"training.py: resumed from {ckpt_dir / CHECKPOINT_NAME} at step {state['step']} "
                      f"(world {d.world})", file=sys.stderr, flush=True)
    net = nn.parallel.DistributedDataParallel(model) if d.world > 1 else model
    data = SyntheticCifar(args.seed, args.dataset_samples)
    # A global batch that the world size does not divide is split unevenly (rank r takes
    # [rB/w, (r+1)B/w)); each rank's summed loss scaled by w/B makes DDP's gradient mean the
    # exact global-batch mean, so any size the scheduler picks trains the same model.
    lo, hi = d.rank * args.batch_size // d.world, (d.rank + 1) * args.batch_size // d.world
    speed, goal = emulated_speed(), target_steps(args)
    window_start, window_samples, window_gpu_s = time.perf_counter(), 0, 0.0
    last_ckpt: str | None = None
    code = EXIT_DONE
    while state["step"] < goal:
        t0, cpu0 = time.perf_counter(), time.process_time()
        ids = data.global_batch_indices(state["samples"], args.batch_size)[lo:hi]
        x, y = data.batch(ids)
        loss = F.cross_entropy(net(x.to(d.device)), y.to(d.device), reduction="sum") * (d.world / args.batch_size)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_value, stopping, cpu_s = agree(float(loss.detach()), stop["requested"], time.process_time() - cpu0, d)
        if speed is not None:
            gpu_s = cpu_s / speed
            time.sleep(max(0.0, gpu_s - (time.perf_counter() - t0)))
            window_gpu_s += gpu_s
        state = {"step": state["step"] + 1, "samples": state["samples"] + args.batch_size, "loss": loss_value}
        window_samples += args.batch_size
        done = state["step"] >= goal
        periodic = args.checkpoint_every > 0 and state["step"] % args.checkpoint_every == 0
        if ckpt_dir is not None and (stopping or done or periodic):
            if d.is_main:
                if save_checkpoint(ckpt_dir, model, opt, state, generation):
                    last_ckpt = str(ckpt_dir / CHECKPOINT_NAME)
                else:
                    say_stale(ckpt_dir)
                    code = EXIT_FENCED
            code = EXIT_FENCED if any_rank(code == EXIT_FENCED, d) else code
            if code == EXIT_FENCED:
                break
        if d.is_main and (stopping or done or state["step"] % args.report_every == 0):
            elapsed = window_gpu_s if speed is not None else time.perf_counter() - window_start
            progress({"step": state["step"], "samples": state["samples"],
                      "samples_per_s": round(window_samples / elapsed, 3) if elapsed > 0 else 0.0,
                      "loss": round(loss_value, 5), "checkpoint": last_ckpt,
                      "epoch": round(state["samples"] / args.dataset_samples, 4), "world_size": d.world})
            window_start, window_samples, window_gpu_s = time.perf_counter(), 0, 0.0
        if stopping and not done:
            code = EXIT_STOPPED
            break
    return leave(code, d)


def any_rank(flag: bool, d: Dist) -> bool:
    """True on every rank when ``flag`` is true on any."""
    if d.world == 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=d.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def leave(code: int, d: Dist) -> int:
    if d.world > 1:
        # Every rank leaves the group together: a rank that tears down its gloo pairs while a
        # peer is still writing the checkpoint can make that peer abort on the way out.
        dist.barrier()
        dist.destroy_process_group()
    return code


def main(argv: list[str] | None = None) -> int:
    return train(parse_args(argv))


if __name__ == "__main__":
    status = main()
    # Skip interpreter finalisation: gloo's worker threads can still abort the process there
    # ("terminate called without an active exception", SIGABRT), which would turn a finished
    # run into a crash. Everything that matters is flushed or written atomically by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
