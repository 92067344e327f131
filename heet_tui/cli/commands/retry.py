"""``heet-tui retry NAME [NAME ...]``: queue failed or cancelled jobs again, from their checkpoints.

Works with or without a running controller: the job is queued in the state store, and the
controller plans it at its next round. Names are as for ``heet-tui cancel``; a pattern
(``'sweep-*'``) matches the ended jobs.
"""

from __future__ import annotations

import argparse
import time

from heet_tui.cli.commands.cancel import add_names_command, resolve_jobs, sibling_in
from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.control.retry import retry_job
from heet_tui.core.job import RETRYABLE, JobState, retryable


def register(sub: argparse._SubParsersAction) -> None:
    add_names_command(sub, "retry", "queue failed or cancelled jobs (or done short of their target) again, "
                      "from their checkpoints", cmd_retry,
                      ended=True)


def cmd_retry(args: argparse.Namespace) -> int:
    store = open_store(args)
    jobs = resolve_jobs(store, args.names, ended=True, verb="retried", states=(*RETRYABLE, JobState.DONE),
                        keep=retryable, kind="failed or cancelled")
    refused = [j for j in jobs if not retryable(j)]
    if refused:
        raise UsageError("; ".join(f"{j.id} is {j.state.value}" for j in refused)
                         + ": only failed or cancelled jobs, or done ones short of their target, are retried"
                         + ("; nothing retried" if len(jobs) > 1 else "")
                         + "".join(sibling_in(store, j, RETRYABLE, "retry") for j in refused))
    for job in jobs:
        try:
            print(retry_job(store, store.job(job.id), time.time()))
        except ValueError as exc:
            raise UsageError(f"{job.id}: {exc}") from None
    return 0
