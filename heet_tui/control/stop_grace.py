"""A job's stop grace: the time from the stop signal (SIGTERM) to SIGKILL, and the warnings when
the job needs more than it has.

Every resize, move and preemption stops the job this way, and the job must finish its step and
save its checkpoint inside the grace. Thirty seconds suit the small models of a lab, not a
model whose checkpoint takes a minute to write: such a job was killed in the middle of every
save, trained again from its previous checkpoint after each move, and nothing said why. The
spec's ``stop_grace`` gives it more; these warnings say when it needs it.
"""

from __future__ import annotations

import math
import signal
from typing import TYPE_CHECKING, Any

from heet_tui.control.runtime import Run, exited_0_at_stop
from heet_tui.core.job import JobSpec

if TYPE_CHECKING:
    from heet_tui.control.store import Store

KILLED_AT_STOP = "was still running at the end of its stop grace"
FAILED_AT_STOP = "failed when it was stopped"
CLEAN_STOP_CODES = (3, 143)  # fenced by a newer copy; stopped on request (heet_agent.elastic)
SLOW_STOP = "may not stop within its stop grace"
MARGIN = 0.8  # a stop must fit in this share of the grace: steps and saves vary
# The stop grace of a run's ranks left on the hosts still up when a host of it is lost: they wait
# on the lost ranks in a collective (an all-reduce), where no SIGTERM reaches the script, and have
# been waiting for the whole host-loss grace already (a save under way has had that long to end).
LOST_PEER_GRACE_S = 5.0


def grace_s(spec: JobSpec | None, default: float) -> float:
    return float(spec.stop_grace_s) if spec is not None and spec.stop_grace_s else default


def suggested_grace(needed_s: float) -> int:
    """Twice what a stop was seen to need, in tens of seconds."""
    return int(10 * math.ceil(2 * needed_s / 10))


def note_killed_at_stop(store: Store, run: Run, grace: float, now: float, last_line: str = "") -> None:
    """A run the controller stopped whose ranks were SIGKILLed, or answered the stop with an error:
    say so, with what to change and the last line its log has (``job_log.say_stop_warning``).

    Before, the run counted as stopped like any other, and the next launch resumed from an older
    checkpoint (or from none) with at most a lost-progress warning that could not say why.
    """
    if (warning := stop_warning(run, grace)) is not None:
        store.add_event(now, "warning", warning + (f"; its last log line: {last_line}" if last_line else ""),
                        run.job_id)


def stop_warning(run: Run, grace: float) -> str | None:
    """What ``note_killed_at_stop`` says of the run, or None for a stop that went as asked."""
    if run.profiling or run.stop_reason is None:
        return None
    killed = sorted(r.rank for r in run.ranks.values() if r.signal == signal.SIGKILL)
    if run.stop_reason.startswith("host"):
        return _peers_of_lost_ranks(run, killed)
    if not killed:
        return _failed_stop(run)
    ranks = f"rank {killed[0]}" if len(killed) == 1 else f"ranks {', '.join(map(str, killed))}"
    # "a larger stop_grace" was the only advice for a script that ignored SIGTERM, which no grace helps
    return (f"{run.job_id} generation {run.generation} {KILLED_AT_STOP} ({grace:g} s) and was killed ({ranks}, "
            "SIGKILL): a checkpoint it was writing is lost, and its next launch resumes from the one before. If its "
            "last step and checkpoint take longer, give it a larger stop_grace (seconds) in its job spec: heet-tui "
            "update JOB.toml; if it does not handle SIGTERM (save, then exit 143), no grace helps: heet_agent.elastic "
            "does it (docs/TRAINING.md)")


def _peers_of_lost_ranks(run: Run, killed: list[int]) -> str | None:
    """The ranks on hosts still up, killed once their peers' host was lost: said nowhere, and not
    the script's fault (the usual stop warning told it to handle SIGTERM). Ranks on the lost host
    itself, killed by the fence once it is back, are not these."""
    lost = (run.stop_reason or "").split(" ")[1:2]
    killed = [r for r in killed if [run.ranks[r].host] != lost]
    if not killed:
        return None
    where = ", ".join(f"{r.rank} on {r.host}" for r in sorted(run.ranks.values(), key=lambda r: r.rank)
                      if r.rank in killed)
    return (f"{run.job_id} generation {run.generation}: rank{'s' if len(killed) > 1 else ''} {where} killed (SIGKILL) "
            f"{LOST_PEER_GRACE_S:g} s after the stop, once its {run.stop_reason}: "
            f"{'it' if len(killed) == 1 else 'they'} waited on the lost ranks in a collective, which no stop signal "
            f"ends, so {'it' if len(killed) == 1 else 'they'} saved nothing; the next launch resumes from the last "
            "checkpoint")


def _failed_stop(run: Run) -> str | None:
    """A stop a rank answered with an error (exit 1, not 143): a DataLoader worker killed by the
    stop signal made the main process raise inside its step, before it saved, and the stop was
    recorded like a clean one; the next launch trained again from an older checkpoint."""
    failed = {r.rank: r.exit_code for r in run.ranks.values() if r.exit_code not in (None, 0, *CLEAN_STOP_CODES)}
    if not failed and exited_0_at_stop(run, run.spec) and run.stop_reason != "cancel":
        return (f"{run.job_id} generation {run.generation} exited 0 when it was stopped ({run.stop_reason}), short "
                "of its target: counted as stopped, not done, and it resumes from its checkpoint. Exit 0 means the "
                "target is reached: on SIGTERM, save the checkpoint and exit 143 (heet_agent.elastic does; "
                "docs/TRAINING.md)")
    if not failed:
        return None
    codes = ", ".join(f"rank {rank} exit code {code}" for rank, code in sorted(failed.items()))
    # "DataLoader workers" alone was said of a save that failed on a full disk
    return (f"{run.job_id} generation {run.generation} {FAILED_AT_STOP} ({run.stop_reason}): {codes}, not 143. "
            "It may not have saved a checkpoint, and its next launch resumes from the last one it did; see its "
            "log (heet-tui log). DataLoader workers killed by the stop signal are a usual cause (docs/TRAINING.md)")


def warn_slow_stop(store: Store, warned: set[tuple[str, str]], run: Run, progress: dict[str, Any],
                   grace: float, now: float) -> None:
    """A job whose last checkpoint save (``checkpoint_s`` in its progress line) plus one step
    takes most of its stop grace is warned once, before a stop kills it."""
    save_s, rate = progress.get("checkpoint_s"), progress.get("samples_per_s")
    if run.profiling or run.spec is None or (run.job_id, SLOW_STOP) in warned:
        return
    if isinstance(save_s, bool) or not isinstance(save_s, int | float) or not math.isfinite(save_s) or save_s < 0:
        return
    step_s = run.spec.batch_size / rate if isinstance(rate, int | float) and rate > 0 else 0.0
    needed = float(save_s) + step_s
    if needed <= MARGIN * grace:
        return
    warned.add((run.job_id, SLOW_STOP))
    store.add_event(now, "warning", f"{run.job_id} {SLOW_STOP} ({grace:g} s): its checkpoint took {save_s:.0f} s to "
                    f"save and a step takes {step_s:.1f} s, so a resize or move may kill it (SIGKILL) before it saves, "
                    f"and it would train again from its previous checkpoint. Give it stop_grace = "
                    f"{suggested_grace(needed)} in its job spec (heet-tui update JOB.toml)", run.job_id)
