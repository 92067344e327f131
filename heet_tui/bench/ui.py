"""``heet-tui bench ui``: how fast the TUI absorbs snapshot updates on a big cluster, and starts.

Figures (all measured on the real app, headless, with synthetic snapshots of the given size):
- ``update_ms``: per screen, from posting one ``SnapshotArrived`` until the handler ran and the
  frame it dirtied was composed (message dispatch, table diffing, layout and repaint; the wait
  for the frame timer itself is excluded), p50/p95/max over ``--updates`` updates;
  ``cpu_p50``/``cpu_p95`` give the process CPU time of the same interval: on a crowded machine
  the wall figure includes time the process waited for a core, the CPU figure does not;
- ``loop_lag_ms``: the largest delay a 5 ms ticker on the same event loop saw during the updates,
  i.e. how long the UI was unresponsive to keys at worst;
- ``first_paint_s``: from spawning a fresh ``python`` to the first frame, and to the first frame
  with the first snapshot drawn, in a child process (imports included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time

from heet_tui.bench.synthetic_snapshot import SyntheticCluster

SCREENS = ("cluster", "jobs", "plan", "profiles")
TARGETS = {"update_p95_ms": 50.0, "loop_lag_ms": 100.0, "first_paint_s": 1.5}


def register(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("ui", help="TUI snapshot-update latency, event-loop lag and start-up time")
    p.add_argument("--hosts", type=int, default=256, help="hosts in the synthetic cluster (default 256)")
    p.add_argument("--jobs", type=int, default=2000, help="jobs in the synthetic queue (default 2000)")
    p.add_argument("--updates", type=int, default=30, help="snapshot updates per screen (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_main)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _measure_updates(cluster: SyntheticCluster, updates: int) -> dict:
    from heet_tui.ui.app import HeetApp
    from heet_tui.ui.messages import SnapshotArrived

    frames = [cluster.snapshot(step) for step in range(updates + 1)]
    # The prepared frames are the bench's, not the app's: keep the collector from scanning them,
    # or a full collection over ~50 snapshots' worth of objects shows up as event-loop lag.
    gc.collect()
    gc.freeze()
    app = HeetApp(None, None, start_mode="cluster")
    lag = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal lag
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lag = max(lag, time.perf_counter() - before - 0.005)

    result: dict[str, dict[str, float]] = {}
    lags: dict[str, float] = {}
    async with app.run_test(size=(200, 60)) as pilot:
        for mode in SCREENS:
            app.switch_mode(mode)
            app.post_message(SnapshotArrived(frames[0]))  # the first draw of a screen is start-up, not an update
            await pilot.pause()
            task = asyncio.create_task(ticker())
            times, cpu = [], []
            for snap in frames[1:]:
                seen = app.snapshots_seen
                c0 = time.process_time()
                t0 = time.perf_counter()
                app.post_message(SnapshotArrived(snap))
                while app.snapshots_seen == seen:
                    await asyncio.sleep(0)
                # Paint now what the next frame would paint (layout + compositor + the dirty widgets),
                # rather than wait for the frame timer: the figure is the work, not the frame interval.
                app.screen._on_timer_update()
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                await asyncio.sleep(0.02)  # let the ticker and the app breathe between updates
            stop.set()
            await task
            stop.clear()
            lags[mode] = round(lag * 1000, 2)
            lag = 0.0
            result[mode] = {"p50": round(statistics.median(times), 2), "p95": round(_percentile(times, 0.95), 2),
                            "max": round(max(times), 2), "cpu_p50": round(statistics.median(cpu), 2),
                            "cpu_p95": round(_percentile(cpu, 0.95), 2)}
        # The same ticker with no updates at all: what the machine itself adds (other processes, GC).
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.02 * updates)
        stop.set()
        await task
        idle_lag = round(lag * 1000, 2)
    return {"update_ms": result, "loop_lag_ms": max(lags.values()), "loop_lag_ms_by_screen": lags,
            "loop_lag_ms_idle_baseline": idle_lag}


_CHILD = r"""
import sys, time, json
from heet_tui.bench.synthetic_backend import SyntheticBackend
from heet_tui.bench.synthetic_snapshot import SyntheticCluster
from heet_tui.ui.app import HeetApp
marks = {}
class Timed(HeetApp):
    def on_ready(self):
        marks.setdefault("first_frame", time.time())
async def pilot(p):
    while app.snapshots_seen == 0:
        await p.pause(0.005)
    await p.pause()
    marks["first_snapshot_drawn"] = time.time()
    app.exit()
app = Timed(SyntheticBackend(SyntheticCluster(int(sys.argv[1]), int(sys.argv[2])), interval_s=0.5, steps=1), None,
            start_mode="jobs")
app.run(headless=True, size=(200, 60), auto_pilot=pilot)
print(json.dumps(marks))
"""


def _first_paint(hosts: int, jobs: int) -> dict[str, float]:
    start = time.time()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(hosts), str(jobs)], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"start-up probe failed: {out.stderr.strip()[-500:]}")
    marks = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: round(at - start, 3) for name, at in marks.items()}


def _main(args: argparse.Namespace) -> int:
    from heet_tui.cli.errors import UsageError

    if args.hosts < 1 or args.jobs < 0 or args.updates < 1:
        raise UsageError("--hosts and --updates must be >= 1, --jobs >= 0")
    cluster = SyntheticCluster(args.hosts, args.jobs)
    figures = asyncio.run(_measure_updates(cluster, args.updates))
    paint = _first_paint(args.hosts, args.jobs)
    worst_p95 = max(s["p95"] for s in figures["update_ms"].values())
    report = {
        "bench": "ui", "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2), "hosts": args.hosts, "jobs": args.jobs, "updates_per_screen": args.updates,
        **figures, "update_p95_ms_worst": worst_p95, "first_paint_s": paint, "targets": TARGETS,
        "meets_targets": worst_p95 <= TARGETS["update_p95_ms"] and figures["loop_lag_ms"] <= TARGETS["loop_lag_ms"]
        and paint.get("first_frame", 1e9) <= TARGETS["first_paint_s"],
    }
    if args.json:
        print(json.dumps(report))
    else:
        for screen, s in figures["update_ms"].items():
            print(f"{screen:9s} update p50 {s['p50']:7.2f} ms  p95 {s['p95']:7.2f} ms  max {s['max']:7.2f} ms  "
                  f"(CPU p50 {s['cpu_p50']:.2f} ms, p95 {s['cpu_p95']:.2f} ms)")
        print(f"peak event-loop lag {figures['loop_lag_ms']:.1f} ms (by screen {figures['loop_lag_ms_by_screen']}, "
              f"idle baseline {figures['loop_lag_ms_idle_baseline']} ms)")
        print(f"first frame {paint.get('first_frame')} s, "
              f"first snapshot drawn {paint.get('first_snapshot_drawn')} s")
    return 0
