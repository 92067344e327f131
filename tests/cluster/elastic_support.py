"""What the heet_agent.elastic tests share: the smallest elastic script and how to run it by hand."""

from __future__ import annotations

import json
import os
from pathlib import Path

PREFIX = "@heet-progress "

# The docstring's loop, on a linear model: the smallest script a user would write.
SCRIPT = """
import sys
import pytest
import torch
import torch.nn.functional as F
from heet_agent import elastic

try:
    run = elastic.start(report_every=1, checkpoint_interval_s=float(sys.argv[1]) if len(sys.argv) > 1 else 600.0)
except elastic.ElasticError as exc:
    sys.exit(f"train.py: {exc}")
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
resumed = run.resume(model=model, optimizer=opt)
print(f"resumed={resumed} step={run.step}", file=sys.stderr, flush=True)
net = run.wrap(model)
part = run.shard()
g = torch.Generator().manual_seed(1)
xs, ys = torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g)
while run.running:
    ids = torch.arange(run.samples, run.samples + run.batch_size) % 64
    x, y = xs[ids][part], ys[ids][part]
    loss = F.cross_entropy(net(x), y, reduction="sum") * run.loss_scale
    opt.zero_grad()
    loss.backward()
    opt.step()
    accuracy = float((net(x).argmax(1) == y).float().mean())
    run.step_done(loss=loss, accuracy=torch.tensor(accuracy))
run.exit()
"""


def script_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEET_") and k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def progress_of(text: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines() if line.startswith(PREFIX)]


def training_script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path
