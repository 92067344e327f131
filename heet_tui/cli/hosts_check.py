"""``heet-tui hosts check`` and ``heet-tui hosts trust``: the functions the CLI commands call.

``run_check`` connects to every host at once (deploying the agent), then prints one row per
host, or with ``as_json`` a list of objects with keys name, state, message, gpu_source, gpus
(index, type, memory_mb), agent_version, rtt_ms and warnings (what a ready host asks the user to see).
Exit code 0 when every host is ready.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from typing import Any

from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.names import known_names
from heet_tui.cluster.cluster import Cluster
from heet_tui.cluster.errors import ClusterError
from heet_tui.cluster.hostkeys import (
    KeyToApprove,
    fetch_host_key_fingerprint,
    trust_host,
)
from heet_tui.cluster.options import ClusterOptions
from heet_tui.cluster.ssh_config_check import ssh_config_refusals
from heet_tui.config.hosts_file import HostsFile
from heet_tui.core.host import HostState

# One pass, no retries: a check reports how each host is now. Its agents only report, so a
# check beside a running controller leaves that controller's agents and jobs alone.
CHECK_OPTIONS = ClusterOptions(backoff_initial_s=3600.0, backoff_max_s=3600.0, check_only=True)


async def check_hosts(hosts_file: HostsFile, options: ClusterOptions = CHECK_OPTIONS) -> list[dict[str, Any]]:
    cluster = Cluster(hosts_file, options)
    await cluster.start()
    try:
        await cluster.wait_settled(timeout=options.connect_timeout_s * 2 + 5)
        rows = []
        for status in cluster.status():
            rows.append({
                "name": status.name,
                "state": status.state.value,
                "message": status.message,
                "gpu_source": status.gpu_source or None,
                "gpus": [{"index": g.index, "type": g.gpu_type, "memory_mb": g.memory_mb} for g in status.gpus],
                "agent_version": cluster.agent_version(status.name) or None,
                "rtt_ms": status.rtt_ms if status.state is HostState.READY else None,
                "warnings": cluster.warnings(status.name),
            })
        return rows
    finally:
        await cluster.stop()


def _gpu_summary(gpus: list[dict[str, Any]]) -> str:
    if not gpus:
        return "-"
    counts: dict[str, int] = {}
    for gpu in gpus:
        counts[gpu["type"]] = counts.get(gpu["type"], 0) + 1
    return ",".join(f"{n}x{t}" for t, n in counts.items())


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ("HOST", "STATE", "SOURCE", "GPUS", "AGENT", "RTT", "MESSAGE")
    table = [header] + [(
        r["name"], r["state"], r["gpu_source"] or "-", _gpu_summary(r["gpus"]), r["agent_version"] or "-",
        f"{r['rtt_ms']:.1f}ms" if r["rtt_ms"] is not None else "-",
        "; ".join(r["warnings"]) if r["state"] == "ready" else r["message"],
    ) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row[:-1], widths, strict=True)) + "  " + str(row[-1])
             for row in table]
    return "\n".join(line.rstrip() for line in lines)


def run_check(hosts_file: HostsFile, as_json: bool, hosts_option: str = "", owner: str = "") -> int:
    """``hosts_option``: `` --hosts FILE`` where the file is not the one ``heet-tui hosts trust``
    finds by itself (the command printed for an unknown key said "no host named ..." as given).
    ``owner``: the user's state store id, if they have one: a host another store's controller
    manages is a warning (their controller would be refused there)."""
    rows = asyncio.run(check_hosts(hosts_file, replace(CHECK_OPTIONS, owner=owner, trust_hosts_option=hosts_option)))
    refusals = ssh_config_refusals(hosts_file)
    for row in rows:
        if (refused := refusals.get(row["name"])) is not None:
            row["warnings"] = [*row["warnings"], refused]
            row["message"] = f"{row['message']}; {refused}" if row["message"] else refused
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(rows))
        unknown = [r["name"] for r in rows if HostState(r["state"]).awaits_trust]
        for name in unknown:
            print(f"\n{name}: check the fingerprint with the host's admin, then run: "
                  f"heet-tui hosts trust {name}{hosts_option}")
        if empty := [r["name"] for r in rows if r["state"] == "ready" and not r["gpus"]]:
            print(f"\nready with no usable GPU: {', '.join(empty)} (see MESSAGE)")
    # a ready host that can run nothing fails the check too: a provisioning script passed three such;
    # and one whose SSH config or key ssh(1) refuses (the script's own ssh to it would not start)
    return 0 if rows and all(r["state"] == "ready" and r["gpus"] for r in rows) and not refusals else 1


MAX_HOPS = 8  # jump hosts approved in one "hosts trust", one after the other


def run_trust(hosts_file: HostsFile, name: str, assume_yes: bool, fingerprint: str | list[str] | None = None,
              with_hosts: str = "") -> int:
    """Show the host's key fingerprint, ask y/N (unless ``assume_yes`` for a new key, or the key
    is the ``fingerprint`` given), record it in known_hosts."""
    try:
        entry = hosts_file.host(name)
    except KeyError:
        known = known_names(hosts_file.names(), name, "hosts")
        raise UsageError(f'{hosts_file.path.name}: no host named "{name}" ({known})') from None
    if entry.transport == "local":
        raise UsageError(f'host "{name}" uses the local transport: there is no host key to trust')
    recorded = False  # a jump host's key, before a refusal of the next one
    for _ in range(MAX_HOPS + 1):  # each jump host not known yet, then the host itself
        try:
            found = asyncio.run(fetch_host_key_fingerprint(entry, hosts_file.ssh_config))
        except ClusterError as exc:
            raise CliError(str(exc)) from None
        if found.trusted:
            print(f"{name}: its key {found.fingerprint} is already trusted ({found.target.trust_file})")
            return 0
        given = [fingerprint] if isinstance(fingerprint, str) else fingerprint
        if not _approve(name, found, assume_yes, given, with_hosts, recorded):
            return 1
        try:
            written = asyncio.run(trust_host(replace(entry), found.fingerprint, hosts_file.ssh_config))
        except ClusterError as exc:
            raise CliError(str(exc)) from None
        print(f"Recorded in {written.path}{written.stale}.")
        recorded = True
        if not found.via:
            return 0
    raise CliError(f"{name}: more than {MAX_HOPS} jump hosts")


def _approve(name: str, found: KeyToApprove, assume_yes: bool, fingerprints: list[str] | None = None,
             with_hosts: str = "", recorded: bool = False) -> bool:
    """``with_hosts``: " --hosts FILE" where the file is not the default one, for the commands it
    suggests (run as written, they looked in the default file, where the host was not).
    ``recorded``: a jump host's key was, just before ("nothing was recorded" followed "Recorded in")."""
    nothing = "nothing more was recorded (the key recorded above stays)" if recorded else "nothing was recorded"
    where = f"{found.target.hostname}:{found.target.port}"
    whose = f"Jump host {found.via} ({where}), on the way to {name}," if found.via else f"Host {name} ({where})"
    print(f"{whose} presents a {found.key.get_algorithm()} key with fingerprint\n    {found.fingerprint}")
    if found.changed:  # what a man-in-the-middle looks like: never worded as routine
        files = ", ".join(str(f) for f in found.target.known_hosts if f.is_file())  # the ones it reads, not a guess
        print(f"WARNING: this is NOT the key recorded for it in {files or found.target.trust_file}: "
              "the key CHANGED. Check with the host's admin before trusting it; trusting replaces the old key.")
    if fingerprints and found.fingerprint in fingerprints:
        return True  # the user checked this very key
    if fingerprints:  # asking "trust it?" after a mismatch invited a "y" to the wrong key
        if found.via:  # it read as if the host's own key were wrong, though it was the jump host's
            print(f"Refused: the jump host {found.via}'s key is not trusted yet and is none of the fingerprints "
                  f"you gave ({', '.join(fingerprints)}). Check its fingerprint with its admin too, then give both: "
                  f"heet-tui hosts trust {name}{with_hosts} --fingerprint <{found.via}'s> --fingerprint <{name}'s>; "
                  f"{nothing}.")
        else:
            print(f"Refused: that is not the fingerprint you gave ({', '.join(fingerprints)}). Check again with the "
                  f"host's admin; {nothing}.")
        return False
    if found.changed and assume_yes:
        # --yes is for first contact in scripts; it replaced a changed key (what an attack looks like) unasked
        print(f"Refused: --yes does not replace a changed key. Check {found.fingerprint} with the host's admin, "
              f"then: heet-tui hosts trust {name}{with_hosts} --fingerprint {found.fingerprint}")
        return False
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError("not a terminal: pass --yes to trust without asking")
    answer = input(f"Trust it and record it in {found.target.trust_file}? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        print("Not trusted.")
    return answer in ("y", "yes")
