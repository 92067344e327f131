"""Hosts gone from the hosts file that the controller keeps, drained, for their jobs' sake.

A host removed while it runs jobs, or holds the only checkpoint of a job that waits, stays until
the jobs have moved and the checkpoints are copied (control/hosts_reload.py). That hold lived in
the running controller alone: after a restart the host was unknown, its jobs were held where they
ran until it was back in the file, and a waiting job started elsewhere from step 0 while its
checkpoint sat on a host that was up. The entries are kept in the store so that the next
controller connects to them again, drained, and drops them once they hold nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from heet_tui.config.hosts_file import EmulateSpec, HostEntry, HostsFile
from heet_tui.control.store import StoreError

if TYPE_CHECKING:
    from heet_tui.control.store import Store

log = logging.getLogger(__name__)

KEPT_SETTING = "kept_hosts"


def _to_obj(entry: HostEntry) -> dict[str, Any]:
    return {**asdict(entry), "line": None}


def _from_obj(obj: dict[str, Any]) -> HostEntry:
    emulate = obj.get("emulate")
    gpus = obj.get("gpus")
    return HostEntry(**{**obj, "emulate": EmulateSpec(**emulate) if emulate else None,
                        "gpus": tuple(gpus) if gpus is not None else None, "tags": tuple(obj.get("tags", ()))})


def remember_kept(store: Store, entries: list[HostEntry]) -> None:
    """The entries kept now (none: the setting is cleared); written only when it changes. A store
    that cannot be written loses the hold, not the round."""
    text = json.dumps({"hosts": sorted((_to_obj(e) for e in entries), key=lambda o: o["name"])}) if entries else ""
    if (store.setting(KEPT_SETTING) or "") != text:
        try:
            store.set_setting(KEPT_SETTING, text)
        except StoreError as exc:
            log.warning("the hosts kept for their jobs are not recorded (%s): a restart forgets them", exc)


def kept_entries(store: Store) -> list[HostEntry]:
    """What the last controller kept, whatever hosts file the next one runs on: the hold is for this
    store's jobs (a copy of the file under another name lost it, though `hosts remove` had said the
    next controller would keep the host). A damaged setting is logged and read as none (the hold is
    a courtesy: without it the plans warn of a checkpoint left behind, as before)."""
    try:
        saved = json.loads(store.setting(KEPT_SETTING) or "{}")
        return [_from_obj(o) for o in saved["hosts"]] if saved else []
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("the hosts kept for their jobs could not be read (%s): none are", exc)
        return []


def with_kept_hosts(hosts: HostsFile, store: Store) -> tuple[HostsFile, frozenset[str]]:
    """``hosts`` with the kept entries the file does not have again, and their names."""
    listed = set(hosts.names())
    kept = [e for e in kept_entries(store) if e.name not in listed]
    return replace(hosts, hosts=(*hosts.hosts, *kept)), frozenset(e.name for e in kept)
