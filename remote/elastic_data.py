"""Data for ``heet_agent.elastic``: the sample order of ``ElasticRun.batch_sampler`` (one fixed
sequence of epochs, whatever the world size) and DataLoader workers that outlive a stop.

Python 3.8 syntax, like the rest of the agent bundle.
"""

import signal


class BatchSampler:
    """This rank's share of global positions ``first + step * batch ..``, each mapped through its
    epoch's permutation (drawn from the seed and the epoch only, on the CPU generator, so every
    rank and every host draws the same)."""

    def __init__(self, size, seed, shuffle, first, batch, steps, part):
        """``first`` and ``steps`` may be callables, read when the batches are drawn: a loader made
        before ``resume`` started every relaunch at sample 0, and trained on the wrong data unsaid."""
        self.size, self.seed, self.shuffle = size, seed, shuffle
        self._first, self.batch, self._steps, self.part = first, batch, steps, part
        self._epoch, self._order = None, None

    @property
    def first(self):
        return self._first() if callable(self._first) else self._first

    @property
    def steps(self):
        return max(0, self._steps() if callable(self._steps) else self._steps)

    def __len__(self):
        return self.steps

    def _position(self, pos):
        epoch, offset = divmod(pos, self.size)
        if epoch != self._epoch:
            import torch

            if self.shuffle:
                generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
                self._order = torch.randperm(self.size, generator=generator).tolist()
            else:
                self._order = list(range(self.size))
            self._epoch = epoch
        return self._order[offset]

    def __iter__(self):
        first = self.first
        for step in range(self.steps):
            start = first + step * self.batch
            positions = range(start, start + self.batch)[self.part]
            yield [self._position(pos) for pos in positions]


def ignore_sigterm(worker_id=None):
    """A ``worker_init_fn`` for DataLoaders built by hand: the worker outlives the group's SIGTERM
    and leaves the stop to the main process (see ``ElasticRun.data_loader``)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def end_workers(wait_s=1.0):
    """End the main process's daemonic children (DataLoader workers) before Python's exit does.

    Python's exit terminates them with SIGTERM and waits for each: workers that ignore it (as
    above) with ``persistent_workers=True`` kept a finished job's process alive for good, its
    target reached and nothing left to do. Those still there after ``wait_s`` are killed."""
    import sys
    import time

    mp = sys.modules.get("multiprocessing")
    children = [c for c in mp.active_children() if c.daemon] if mp is not None else []
    if not children:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's handler would report each as a failed worker
    for child in children:
        child.terminate()
    deadline = time.monotonic() + wait_s
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1.0)


class WorkerInit:
    """Picklable (for the ``spawn`` start method): ignore SIGTERM, then the user's own init."""

    def __init__(self, then):
        self.then = then

    def __call__(self, worker_id):
        ignore_sigterm(worker_id)
        if self.then is not None:
            self.then(worker_id)
