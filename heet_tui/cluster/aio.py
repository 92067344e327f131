"""Background tasks: kept referenced while they run, and stopped without hanging or hiding the caller's
own cancellation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Future], timeout_s: float, what: str = "task") -> None:
    """Cancel ``tasks`` and wait up to ``timeout_s`` for them to end.

    ``await task`` inside ``suppress(BaseException)`` would also swallow a cancellation aimed at
    the caller, and would wait forever for a task that ignored its cancel (on Python 3.11 a
    cancel racing a completing ``wait_for`` is lost). ``asyncio.wait`` does neither.
    """
    pending = [t for t in tasks if t is not None and not t.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return
    _, stuck = await asyncio.wait(pending, timeout=timeout_s)
    for task in stuck:
        log.warning("%s %r did not stop within %g s; abandoning it", what, task, timeout_s)


def spawn(tasks: set[asyncio.Task], coro) -> asyncio.Task:
    """Run ``coro`` as a task held in ``tasks`` until it ends (the loop keeps only weak references)."""
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task
