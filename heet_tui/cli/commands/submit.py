"""``heet-tui submit JOB.toml``: queue a job; a running controller picks it up at its next round."""

from __future__ import annotations

import argparse
import json
import time

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_hosts_option, add_state_option
from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import load_hosts, resolve_hosts_path
from heet_tui.config.job_spec import gpu_types_hint, load_job_spec, workdir_hint
from heet_tui.control.checkpoint_dirs import CheckpointDirInUse, resumed_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit a job (job.toml) to the queue")
    add_state_option(p, after_command=True)
    add_hosts_option(p, after_command=True)
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
    earlier = store.checkpoint_users(spec.checkpoint_dir) if spec.checkpoint_dir else []
    try:
        job = store.add_job(spec, now)
    except CheckpointDirInUse as exc:
        raise UsageError(f"{args.spec}: job {spec.name!r}: {exc}") from None
    store.add_event(now, "submit", f"submitted {job.id} from {args.spec}", job.id)
    resumes = resumed_from(earlier)
    hints = [h for h in (workdir_hint(spec, args.spec), _types_hint(spec, args, store)) if h]
    twins = [r.job.id for r in store.jobs() if r.job.id != job.id and r.job.spec.model == spec.model
             and r.job.spec.batch_size == spec.batch_size]
    if args.json:
        print(json.dumps({"id": job.id, "state": job.state.value, **({"resumes_from": resumes.job_id} if resumes else {}),
                          **({"warning": "; ".join(hints)} if hints else {})}))
        return 0
    print(f"submitted {job.id} ({spec.min_gpus}-{spec.max_gpus} GPUs, target "
          f"{spec.target.value:g} {spec.target.kind.value})")
    if resumes:
        print(f"note: {spec.checkpoint_dir} holds the checkpoint of job {resumes.job_id} ({resumes.state.value}, "
              f"{resumes.samples_done:g} samples done): {job.id} resumes from it")
    if twins:
        more = f" and {len(twins) - 1} more" if len(twins) > 1 else ""
        print(f"note: model {spec.model} at batch {spec.batch_size}, as {twins[0]}{more}: they share throughput "
              "measurements (a new model key keeps it apart)")
    for hint in hints:
        print(f"warning: {hint}")
    return 0


def _types_hint(spec, args: argparse.Namespace, store) -> str | None:
    """Checked against the hosts file a controller of this store last ran on, else the one given
    or found; a file that does not load is the controller's to report, not the submitter's."""
    path = getattr(args, "hosts", None) or store.setting("hosts_path") or resolve_hosts_path(None)
    try:
        hosts = load_hosts(path)
    except (ConfigError, OSError):
        return None
    return gpu_types_hint(spec, hosts)
