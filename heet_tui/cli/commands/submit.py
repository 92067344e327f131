"""``heet-tui submit JOB.toml``: queue a job; a running controller picks it up at its next round."""

from __future__ import annotations

import argparse
import json
import time

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.config.errors import ConfigError
from heet_tui.config.job_spec import load_job_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit a job (job.toml) to the queue")
    p.add_argument("spec", metavar="JOB.toml")
    p.add_argument("--json", action="store_true", help="print the new job as JSON")
    p.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        spec = load_job_spec(args.spec)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(args)
    now = time.time()
    job = store.add_job(spec, now)
    store.add_event(now, "submit", f"submitted {job.id} from {args.spec}", job.id)
    if args.json:
        print(json.dumps({"id": job.id, "state": job.state.value}))
    else:
        print(f"submitted {job.id} ({spec.min_gpus}-{spec.max_gpus} GPUs, target "
              f"{spec.target.value:g} {spec.target.kind.value})")
    return 0
