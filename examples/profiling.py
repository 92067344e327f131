"""Short profiling run: train a tiny model for a bounded time and report its real throughput.

heet profiles a new job with a few runs like this one on chosen GPU sets and feeds the measured
samples/s into the throughput tensor. It must be cheap and honest:

* bounded by ``--steps`` and/or ``--seconds`` (whichever comes first), after ``--warmup`` steps
  that are not timed (first steps pay for allocation and kernel selection);
* runs data-parallel with torch.distributed when started with ``WORLD_SIZE`` > 1 (nccl on GPUs,
  gloo on CPU), on the GPUs in ``CUDA_VISIBLE_DEVICES``, or on the CPU when there are none;
* on emulated hosts (``HEET_EMULATED_SPEED``) a step is timed as its CPU time / speed and paced
  to that, so a slower emulated GPU really measures slower, whatever else shares the cores;
* prints ``@heet-progress {json}`` lines (rank 0) in the format the agent forwards, each with the
  throughput over the timed steps so far; the last line has ``"final": true``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# torch is imported inside the functions that use it, after the arguments and environment have
# been checked: a misconfigured run then fails in milliseconds instead of after a slow import.


def build_model(name: str):  # -> torch.nn.Module
    from torch import nn

    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("small-cnn", "mlp"), default="small-cnn")
    p.add_argument("--batch-size", type=int, default=64, help="global batch size (split over ranks)")
    p.add_argument("--steps", type=int, default=50, help="timed steps at most")
    p.add_argument("--seconds", type=float, default=30.0, help="timed wall seconds at most")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--report-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.batch_size <= 0 or args.steps <= 0 or args.seconds <= 0 or args.warmup < 0:
        p.error("--batch-size, --steps and --seconds must be positive, --warmup >= 0")
    return args


def emulated_speed() -> float | None:
    """The declared speed of the emulated GPU, or None on a real (or CPU-only) host."""
    raw = os.environ.get("HEET_EMULATED_SPEED", "")
    if not raw:
        return None
    try:
        speed = float(raw)
    except ValueError:
        raise SystemExit(f"profiling: HEET_EMULATED_SPEED must be a number, got {raw!r}") from None
    if not 0 < speed <= 1000:
        raise SystemExit(f"profiling: HEET_EMULATED_SPEED must be in (0, 1000], got {raw!r}")
    return speed


def setup():  # -> (rank, world, torch.device)
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and emulated_speed() is None
    device = torch.device(f"cuda:{local_rank % torch.cuda.device_count()}") if use_cuda else torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world)
    return rank, world, device


def report(step: int, samples: int, rate: float, loss: float, final: bool = False) -> None:
    body = {"step": step, "samples": samples, "samples_per_s": round(rate, 3), "loss": round(loss, 5),
            "checkpoint": None}
    if final:
        body["final"] = True
    print("@heet-progress " + json.dumps(body), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    speed = emulated_speed()
    import torch
    import torch.distributed as dist
    from torch import nn

    rank, world, device = setup()
    if args.batch_size < world:
        raise SystemExit(f"profiling: batch size {args.batch_size} is smaller than the {world} ranks")
    local = args.batch_size // world + (1 if rank < args.batch_size % world else 0)
    torch.manual_seed(args.seed + rank)
    model = build_model(args.model).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(local, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (local,), device=device)
    timed_steps, timed_s, loss_value = 0, 0.0, 0.0
    for step in range(1, args.warmup + args.steps + 1):
        start, cpu0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        took = time.perf_counter() - start
        if speed is not None:
            took = (time.process_time() - cpu0) / speed
            time.sleep(max(took - (time.perf_counter() - start), 0.0))
        loss_value = float(loss.detach())
        if step <= args.warmup:
            continue
        timed_steps += 1
        timed_s += took
        done = timed_steps >= args.steps or timed_s >= args.seconds
        if world > 1:  # every rank must stop at the same step, or DDP's all-reduce hangs
            flag = torch.tensor([1.0 if done else 0.0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            done = bool(flag.item())
        if rank == 0 and (done or timed_steps % args.report_every == 0):
            report(timed_steps, timed_steps * args.batch_size, timed_steps * args.batch_size / timed_s,
                   loss_value, final=done)
        if done:
            break
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
