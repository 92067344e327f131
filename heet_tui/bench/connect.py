"""``heet-tui bench connect --hosts N [--json]``: time to get N real sshd hosts ready.

Starts N loopback sshd servers, then measures start-to-all-``ready`` (connect, deploy the
agent, handshake, inventory) with concurrent connections, against the same work done one host
after another (``max_connects=1``, fresh work dirs so the deploy is repeated), plus a warm
concurrent run where the agents are already deployed. Prints JSON.

On loopback every "host" shares this machine's cores with the controller, so the result also
reports where the CPU went: once the work is CPU-bound, concurrency cannot beat
(controller + hosts CPU) / cores, however well the connections overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from heet_tui.cli.errors import CliError, UsageError

TARGET_S = 3.0
TARGET_SPEEDUP = 8.0


def register(bench_subparsers: argparse._SubParsersAction) -> None:
    parser = bench_subparsers.add_parser("connect", help="time to connect, deploy and handshake N sshd hosts")
    parser.add_argument("--hosts", type=int, default=32, help="number of loopback sshd hosts (default 32)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.set_defaults(func=run)


def _process_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its reaped descendants (sshd sessions, shells, agents)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _time_ready(hosts_path: Path, max_connects: int, timeout_s: float) -> tuple[float, list[float], int]:
    from heet_tui.cluster import Cluster, ClusterOptions
    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.core.host import HostState

    options = ClusterOptions(max_connects=max_connects, probes=(), backoff_initial_s=60.0)
    cluster = Cluster(load_hosts(hosts_path), options)
    started = time.monotonic()
    await cluster.start()
    try:
        names = [h.name for h in cluster.hosts_file.hosts]
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if all(cluster.host_status(n).state is HostState.READY for n in names):
                break
            await asyncio.sleep(0.005)
        total = time.monotonic() - started
        per_host = [t - started for t in cluster.ready_times().values() if t is not None]
        return total, per_host, len(per_host)
    finally:
        await cluster.stop()


def measure(hosts: int) -> dict[str, object]:
    from heet_tui.cluster.loopback_sshd import SshLab, kill_jobs_under, sshd_available

    if not sshd_available():
        raise CliError("bench connect needs OpenSSH's /usr/sbin/sshd and ssh-keygen")
    saved = os.environ.pop("SSH_AUTH_SOCK", None)
    with tempfile.TemporaryDirectory(prefix="heet-bench-connect-") as tmp:
        lab = SshLab(Path(tmp))
        try:
            servers = [lab.add_host(f"h{i:03d}") for i in range(hosts)]

            def hosts_file(tag: str) -> Path:
                path = lab.hosts_toml([{**lab.entry_for(s), "workdir": str(s.root / f"work-{tag}")} for s in servers])
                return path.rename(path.with_name(f"hosts-{tag}.toml"))

            concurrent_path, sequential_path = hosts_file("concurrent"), hosts_file("sequential")
            own0, hosts0 = _own_cpu(), sum(_process_cpu(s.process.pid) for s in servers if s.process)
            conc_total, conc_each, conc_ready = asyncio.run(_time_ready(concurrent_path, 64, 120.0))
            time.sleep(0.5)  # let sshd reap the sessions so their CPU time is counted
            own_cpu = _own_cpu() - own0
            host_cpu = sum(_process_cpu(s.process.pid) for s in servers if s.process) - hosts0
            warm_total, warm_each, _warm_ready = asyncio.run(_time_ready(concurrent_path, 64, 120.0))
            seq_total, _seq_each, seq_ready = asyncio.run(_time_ready(sequential_path, 1, 600.0))
        finally:
            lab.close()
            for server in lab.servers:
                kill_jobs_under(server.workdir)
    if saved is not None:
        os.environ["SSH_AUTH_SOCK"] = saved
    speedup = seq_total / conc_total if conc_total > 0 else None
    floor = (own_cpu + host_cpu) / (os.cpu_count() or 1)  # concurrency cannot beat this here
    return {
        "bench": "connect",
        "hosts": hosts,
        "concurrent_all_ready_s": round(conc_total, 3),
        "concurrent_ready": conc_ready,
        "per_host_median_s": round(statistics.median(conc_each), 3) if conc_each else None,
        # the same hosts again, agents already deployed (a controller restart or a reconnect storm)
        "warm_all_ready_s": round(warm_total, 3),
        "warm_per_host_median_s": round(statistics.median(warm_each), 3) if warm_each else None,
        "sequential_all_ready_s": round(seq_total, 3),
        "sequential_ready": seq_ready,
        "speedup": round(speedup, 2) if speedup else None,
        "target": {"all_ready_s": TARGET_S, "speedup": TARGET_SPEEDUP, "for_hosts": 32},
        "meets_target": bool(conc_ready == hosts and conc_total < TARGET_S and (speedup or 0) >= TARGET_SPEEDUP),
        "cpus": os.cpu_count(),
        # Where the concurrent run spent CPU: on loopback every "host" shares these cores, so the
        # concurrent time cannot drop below (controller + hosts CPU) / cores.
        "controller_cpu_s": round(own_cpu, 3),
        "hosts_cpu_s": round(host_cpu, 3),
        "cpu_floor_s": round(floor, 3),
        # the best speedup these cores allow: one-by-one time over the CPU-bound floor
        "speedup_ceiling": round(seq_total / floor, 2) if floor > 0 else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run(args: argparse.Namespace) -> int:
    if args.hosts < 1 or args.hosts > 250:
        raise UsageError("--hosts must be from 1 to 250 (one loopback address each)")
    result = measure(args.hosts)
    if not args.json:
        print(f"{args.hosts} hosts: all ready in {result['concurrent_all_ready_s']} s concurrently, "
              f"{result['sequential_all_ready_s']} s one by one ({result['speedup']}x)")
    print(json.dumps(result, indent=None if args.json else 2))
    return 0 if result["concurrent_ready"] == args.hosts else 1
