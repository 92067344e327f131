"""Elastic data-parallel training of a tiny CNN: checkpoint, stop on SIGTERM, resume at any world size.

This is the job heet-tui runs in its examples and end-to-end tests, and the reference for a
script that is resized: the controller stops it with SIGTERM and relaunches it with another
``WORLD_SIZE``. What being elastic takes (agreeing on the last step across ranks, fenced and
atomic checkpoints, uneven batch splits, emulated GPU speed, progress lines) is in
``heet_agent.elastic``, which every job heet-tui starts can import; this file is the model, the
data and the loop. What the script itself must get right:

* The data is generated from the seed (CIFAR-sized 3x32x32 images, 10 classes: a class template
  plus noise), so every run and every rank sees the same samples without a download.
* The *global* batch is fixed and the sample order depends only on (seed, epoch), never on the
  world size: the batch of a step is chosen from ``run.samples`` (the samples trained so far,
  across restarts), each rank taking its ``run.shard()``. With DDP's gradient averaging and the
  loss scaled by ``run.loss_scale`` a resize therefore continues the same optimisation.

Progress goes to stdout as ``@heet-progress {json}`` lines (rank 0 only). Backend: nccl when
CUDA is usable and the host is not emulated, gloo otherwise; no flag to change.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from heet_agent import elastic
from torch import nn

NUM_CLASSES = 10


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
    no_flag = args.steps is None and args.samples is None and args.epochs is None
    if no_flag and not any(os.environ.get(f"HEET_TARGET_{k}") for k in ("STEPS", "SAMPLES", "EPOCHS")):
        args.steps = 100  # no target given anywhere: a short default run
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
        print(f"training.py: {name}={raw!r} is not a number", file=sys.stderr)
        sys.exit(2)  # a bad input, as elastic.start's errors (docs/TRAINING.md)


def target_steps(args: argparse.Namespace) -> int | None:
    """From the command line; None: the job spec's, which elastic.start() reads from the environment."""
    if args.steps is not None:
        return args.steps
    if args.samples is None and args.epochs is None:
        return None
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


def train(args: argparse.Namespace) -> int:
    try:
        run = elastic.start(batch_size=args.batch_size, target_steps=target_steps(args),
                            checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                            checkpoint_interval_s=None, report_every=args.report_every,
                            dataset_samples=args.dataset_samples, name="training.py")
    except elastic.ElasticError as exc:
        print(f"training.py: {exc}", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    model = build_model(args.model).to(run.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    run.resume(model=model, optimizer=opt)
    net = run.wrap(model)
    data = SyntheticCifar(args.seed, args.dataset_samples)
    part = run.shard()
    while run.running:
        x, y = data.batch(data.global_batch_indices(run.samples, args.batch_size)[part])
        loss = F.cross_entropy(net(x.to(run.device)), y.to(run.device), reduction="sum") * run.loss_scale
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run.step_done(loss=float(loss.detach()))
    run.exit()
    return 0  # not reached: exit() ends the process


def main(argv: list[str] | None = None) -> int:
    return train(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
