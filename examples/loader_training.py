"""The smallest elastic script with a DataLoader: what a user's own training loop looks like on heet-tui.

A synthetic classification task (the label is the index of the largest of the first ten
features), an MLP, SGD with a step LR schedule, and ``heet_agent.elastic`` for everything that
makes the job elastic (docs/TRAINING.md, "The quick way"). Every value comes from the job spec
through the environment (batch size, target, checkpoint directory); run by hand it needs
``HEET_BATCH_SIZE`` and ``HEET_TARGET_STEPS``.
"""

import torch
import torch.nn.functional as F
from heet_agent import elastic
from torch.utils.data import TensorDataset


def dataset(size: int = 8192, features: int = 32) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(size, features, generator=g)
    return TensorDataset(x, x[:, :10].argmax(1))


def main() -> None:
    run = elastic.start()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(run.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=400, gamma=0.5)
    run.resume(model=model, optimizer=opt, scheduler=sched)
    net = run.wrap(model)
    for x, y in run.data_loader(dataset(), seed=1, num_workers=1):
        out = net(x.to(run.device))
        loss = F.cross_entropy(out, y.to(run.device), reduction="sum") * run.loss_scale
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        accuracy = float((out.argmax(1) == y.to(run.device)).float().mean())
        run.step_done(loss=loss.item(), accuracy=accuracy, lr=sched.get_last_lr()[0])
        if not run.running:
            break
    run.exit()


if __name__ == "__main__":
    main()
