"""Which hosts are drained, and why: the state store's record, written by the TUI (``d``, the palette),
``heet-tui hosts drain|undrain`` and the controller when it finds a host broken
(``host_health.py``), and read by every plan.

The reason is kept beside the name so the Cluster screen can say why a host takes no work: a
host drained by the controller said so only in a notice that was gone six seconds later.
"""

from __future__ import annotations

import json
import time

from heet_tui.control.store import Store

DRAINED = "drained"  # store setting: sorted host names
REASONS = "drain_reasons"  # store setting: host -> why, when something more than "by hand" is known


def drained_hosts(store: Store) -> set[str]:
    return set(json.loads(store.setting(DRAINED) or "[]"))


def drain_reasons(store: Store) -> dict[str, str]:
    try:
        reasons = json.loads(store.setting(REASONS) or "{}")
        return {str(k): str(v) for k, v in reasons.items()}
    except (ValueError, AttributeError):
        return {}


def drain_by_hand(store: Store, host: str, drained: bool, at: float, how: str) -> None:
    """A drain or undrain by a person, recorded with when and how: the controller's own drains
    were events, and someone's drain at 3 a.m. was nowhere but in the drained set."""
    when = time.strftime("%H:%M:%S", time.localtime(at))
    set_drained(store, host, drained, f"drained by hand at {when} ({how})" if drained else "")
    store.add_event(at, "drained" if drained else "undrained",
                    f"{host} {'drained' if drained else 'back in service'} by hand ({how})", None, host)


def set_drained(store: Store, host: str, drained: bool, why: str = "") -> None:
    hosts, reasons = drained_hosts(store), drain_reasons(store)
    if drained:
        hosts.add(host)
        reasons[host] = why or reasons.get(host, "")
    else:
        hosts.discard(host)
        reasons.pop(host, None)
    store.set_setting(DRAINED, json.dumps(sorted(hosts)))
    store.set_setting(REASONS, json.dumps({h: r for h, r in sorted(reasons.items()) if r and h in hosts}))
