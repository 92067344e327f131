"""Trace-driven simulator: the real policies on a simulated cluster, with measured job physics.

Why: users ask "what would this policy do on my cluster and my jobs?" before trusting it with
real GPUs, the TUI's demo mode runs on it, and it is how policies are compared.

Steppable API (what the TUI demo backend builds on)::

    from heet_tui.sim import Simulation, load_cluster, load_physics, load_workload
    from heet_tui.scheduling.registry import make_policy

    cluster = load_cluster("configs/sim/sia-64gpu.toml")
    physics = load_physics(profiles_dir, cluster)
    sim = Simulation(cluster, load_workload("jobs.csv"), physics, make_policy("heet"),
                     interval=60, oracle=False, seed=0, manual_approval=True)
    sim.step()                  # one round: advance running jobs `interval` s, admit arrivals, plan
    sim.now                     # simulated seconds since the start
    sim.pending_plan            # manual mode: the plan awaiting approval (None when nothing changes)
    sim.approve() / sim.reject()  # apply it now (restarts start now) / drop it
    sim.last_plan               # the policy's most recent plan (applied or not)
    sim.jobs                    # dict id -> SimJob (state, allocation, progress, rate, restarts, ...)
    sim.eta_s(job)              # seconds to completion at the current rate, or None
    sim.submit(WorkloadJob(...)); sim.cancel(id); sim.set_constraints(id, Constraints(...))
    sim.set_policy(policy); sim.replan(); sim.manual_approval = False
    sim.finished; sim.run(); sim.records(); sim.stats  # batch use
    heet_tui.sim.views.snapshot(sim, plan_id=...)  # a core Snapshot (jobs, hosts, plan) for the UI

Without ``manual_approval`` each round's plan is applied at once. Plans that double-book a GPU
or name unknown hosts raise :class:`PolicyError`; bad inputs raise :class:`SimInputError`
naming the file and line; a job that can never run ends with outcome ``"unschedulable"``.

Modules: ``cluster_spec`` (cluster TOML), ``workload`` (CSV), ``validation_data`` and
``step_table`` and ``physics`` (job speed from Sia-format profiles), ``estimates`` (what the
policy is told: oracle or predicted), ``state`` (per-job progress), ``engine`` (the loop),
``views`` (UI snapshots), ``metrics``, ``runner`` (many policies x files), ``generate``
(workloads from the Philly trace), ``plot``. See docs/SIMULATOR.md.
"""

from heet_tui.sim.cluster_spec import SimCluster, load_cluster
from heet_tui.sim.engine import JobRecord, Simulation
from heet_tui.sim.errors import PolicyError, SimInputError
from heet_tui.sim.physics import Physics, load_physics
from heet_tui.sim.workload import WorkloadJob, load_workload

__all__ = [
    "JobRecord", "Physics", "PolicyError", "SimCluster", "SimInputError", "Simulation", "WorkloadJob",
    "load_cluster", "load_physics", "load_workload",
]
