"""A host that drops out for a moment keeps its jobs (control/host_loss.py).

Seen with `heet-tui run --auto-approve` on the bundled config: the agent of the host running a
job was killed; the controller counted the job lost at once, fenced the healthy process when
the agent came back, and relaunched it before the fenced one had exited, which the agent
refused ("generation 3 is still running here") and the controller counted as a crash.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.host_loss import HostLossGrace
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def test_grace_bookkeeping() -> None:
    grace = HostLossGrace(10.0)
    assert grace.lost("a", "unreachable", 0.0) and not grace.lost("a", "again", 5.0), "the first loss counts"
    assert grace.expired(9.0) == [] and grace.holding() == {"a"}
    assert grace.expired(10.0) == [("a", "unreachable")] and grace.holding() == set()
    assert grace.lost("b", "x", 0.0) and grace.back("b") and not grace.back("b")
    assert grace.lost("c", "unreachable: no heartbeat for 12 s", 100.0)
    assert grace.note({"c", "d"}, 104.0) == ("its host c is out (unreachable: no heartbeat for 12 s); it keeps its "
                                             "GPUs for 6 s more in case the host comes back with it still running")
    assert grace.note({"d"}, 104.0) is None, "the job's own hosts only"
    copy = ("agent-error: handshake refused: this host is managed by another heet-tui controller of the same state "
            "store (a copy of its --state directory?)")
    assert grace.lost("e", copy, 200.0) and grace.expired(1e6) == [("c", "unreachable: no heartbeat for 12 s")]
    assert grace.holding() == {"e"}, "a copy's controller serves it: its jobs run there, never counted lost"


def test_a_host_near_the_end_of_its_grace_is_tried_again_every_few_seconds() -> None:
    """The link's backoff had grown to 30 s: a host back 10 s before its deadline was reconnected
    after it, and its healthy job was stopped as lost."""
    from heet_tui.control.host_loss import LAST_TRIES_S, TRY_EVERY_S

    grace = HostLossGrace(60.0)
    grace.lost("a", "unreachable", 0.0)
    grace.lost("held", "agent-error: handshake refused: this host is managed by another heet-tui controller", 0.0)
    start = 60.0 - LAST_TRIES_S
    assert grace.to_try_now(start - 1) == [], "early in the grace the link's own retries do"
    assert grace.to_try_now(start) == ["a"], "a host held for good is not pressed"
    assert grace.to_try_now(start + TRY_EVERY_S - 1) == []
    assert grace.to_try_now(start + TRY_EVERY_S) == ["a"]
    assert grace.back("a") and grace.to_try_now(start + 3 * TRY_EVERY_S) == []
    grace.lost("a", "unreachable", 100.0)
    assert grace.to_try_now(100.0 + start) == ["a"], "a new loss is a new grace"


def test_each_change_of_a_hosts_trouble_is_said_once_and_a_key_says_what_to_do() -> None:
    from heet_tui.control.host_loss import HostStateLog
    from heet_tui.core.host import HostState
    from heet_tui.core.snapshot import HostStatus

    said = HostStateLog()
    seen = [said.saw("g", HostStatus("g", state, message)) for state, message in (
        (HostState.CONNECTING, "connecting"), (HostState.READY, "2 GPUs"), (HostState.READY, "2 GPUs"),
        (HostState.HOST_KEY_CHANGED, "HOST KEY CHANGED"), (HostState.CONNECTING, "retrying"),
        (HostState.HOST_KEY_CHANGED, "HOST KEY CHANGED"), (HostState.AGENT_ERROR, "refused: heard from it 3 s ago"),
        (HostState.CONNECTING, "retrying"), (HostState.AGENT_ERROR, "refused: heard from it 5 s ago"),
        (HostState.READY, "2 GPUs"))]
    assert seen == [None, None, None,
                    "host g is out (host-key-changed: HOST KEY CHANGED); check the key's fingerprint, then: "
                    "heet-tui hosts trust g", None, None, "host g is out (agent-error: refused: heard from it 3 s ago)",
                    None, None, "host g is back"], "the same trouble with other figures is said once"


def test_the_trust_command_a_controller_suggests_names_its_hosts_file(tmp_path: Path, monkeypatch) -> None:
    """`run --hosts "my hosts/hosts.toml"` said "then: heet-tui hosts trust hb", which, pasted, read the
    default file: 'no host named "hb"'."""
    from heet_tui.control.host_loss import HostStateLog, trust_hosts_option
    from heet_tui.core.host import HostState
    from heet_tui.core.snapshot import HostStatus

    monkeypatch.delenv("HEET_HOSTS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    mine = tmp_path / "my hosts" / "hosts.toml"
    assert trust_hosts_option(mine) == f" --hosts '{mine}'"
    user = tmp_path / "xdg" / "heet-tui" / "hosts.toml"  # the file `hosts trust` finds by itself
    user.parent.mkdir(parents=True)
    user.write_text("")
    assert trust_hosts_option(user) == ""
    said = HostStateLog(trust_option=trust_hosts_option(mine)).saw("hb", HostStatus("hb", HostState.HOST_KEY_UNKNOWN,
                                                                                     "unknown host key"))
    assert said.endswith(f"then: heet-tui hosts trust hb --hosts '{mine}'"), said


def _kill_agent(workdir: Path, host: str) -> int:
    pid = int((workdir / "hosts" / host / "agent.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    return pid


def _scenario(tmp_path: Path, grace_s: float, steps: int = 150):
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.2, auto_approve=True, host_loss_grace_s=grace_s, profile=False,
                                execution=ExecOptions(stop_grace_s=10))
    seen: dict = {}

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=steps, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").progress > 0.05,
                           90, "a to run")
            seen["generation"] = store.job("a").generation
            seen["steps"] = store.job("a").job.steps_done
            _kill_agent(tmp_path / "w-only", "only")
            time.sleep(0.5)
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 120, "a to finish")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    return store, seen


def test_an_agent_that_dies_for_a_moment_leaves_its_job_running_and_the_new_agent_adopts_it(tmp_path: Path) -> None:
    store, seen = _scenario(tmp_path, grace_s=60.0)
    rec = store.job("a")
    assert rec.generation == seen["generation"], "never relaunched: the running process was adopted"
    kinds = [e.kind for e in store.events("a", limit=500)]
    assert "fence" not in kinds and "interrupted" not in kinds, kinds
    assert any(e.kind == "host" and "is back" in e.message for e in store.events(limit=500))
    assert any(e.kind == "host" and e.message.startswith("a: its host only is out (") for e in store.events("a")), \
        "the job's own events name the host that stopped it"
    assert rec.crashes == 0


def test_a_running_jobs_stored_message_says_its_host_is_out_until_it_is_back(tmp_path: Path) -> None:
    """heet-tui jobs reads the store: it said "running on 2xT4" with a frozen step count while
    the TUI's snapshot said the host was out."""
    from heet_tui.control.host_loss import say_host_back, say_host_out
    from heet_tui.control.runtime import RankProc, Run
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.job import JobSpec, Target, TargetKind

    store = Store(tmp_path / "state")
    for name in ("a", "b"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
        store.set_state(name, JobState.RUNNING, 1.0, "running on 1xT4 on x[0]")
    alloc = Allocation.of("a", "T4", {"left": [0], "right": [0]})
    runs = [Run("a", alloc, 1, {0: RankProc("left", "a.r0", 0, (0,), "running"),
                                1: RankProc("right", "a.r1", 1, (0,), "running")}, 1.0),
            Run("b", Allocation.of("b", "T4", {"left": [1]}), 1, {0: RankProc("left", "b.r0", 0, (1,), "running")}, 1.0)]
    say_host_out(store, runs, "right", "unreachable: no heartbeat for 10 s", 5.0, 60.0)
    message = store.job("a").job.message
    assert message.startswith("its host right is out (unreachable: no heartbeat for 10 s); it keeps its GPUs until ")
    assert store.job("b").job.message == "running on 1xT4 on x[0]", "not on that host"
    assert store.job("a").job.state is JobState.RUNNING
    say_host_back(store, runs, "right", 9.0)
    assert store.job("a").job.message == f"running on {alloc.describe()}"


def test_after_the_grace_period_the_relaunch_waits_for_the_fenced_process_to_exit(tmp_path: Path) -> None:
    # long enough to be still running when its agent is back (a copy that finished meanwhile
    # would make the job done: test_cut_off_copy.py)
    store, seen = _scenario(tmp_path, grace_s=0.0, steps=600)
    rec = store.job("a")
    events = store.events("a", limit=500)
    assert any(e.kind == "fence" for e in events), "the case this test is about: the old process fenced"
    assert rec.generation > seen["generation"], "lost, then relaunched"
    assert not [e.message for e in events if "launch refused" in e.message], "the relaunch was never refused"
    assert rec.crashes == 0


def test_an_idle_hosts_trouble_is_an_event_and_plans_and_notices_reach_the_log(tmp_path: Path, caplog) -> None:
    """An idle host that dropped out left no event and no line in controller.log (only a later
    "host idle is back"); nor did a proposed plan or a notice such as a hosts file not reloaded."""
    import logging

    caplog.set_level(logging.INFO, logger="heet_tui")
    hosts = load_hosts(write_local_hosts(tmp_path, [("busy", "A100", 1, 1.0), ("idle", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=20, max_gpus=1,
                                                   extra='gpu_types = ["A100"]\n'))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 90, "a done")
            _kill_agent(tmp_path / "w-idle", "idle")
            said = lambda: [e.message for e in store.events(limit=100) if e.host == "idle"]  # noqa: E731
            await wait_for(ctl, lambda s: any(m.endswith("is back") for m in said()), 60, "idle back")
        finally:
            await ctl.stop()
        out = [m for m in said() if m.startswith("host idle is out (")]
        assert len(out) == 1 and said().index(out[0]) < said().index("host idle is back"), said()

    run_and_clean(scenario, tmp_path)
    assert "plan #1 proposed by heet: 1 change(s)" in caplog.text
    assert "notice: plan #1: 1 step(s) done, 0 failed" in caplog.text
    assert "host idle is out (" in caplog.text


def test_a_host_rekeyed_while_out_is_lost_to_its_key_not_to_the_cut() -> None:
    from heet_tui.control.host_loss import why_lost
    from heet_tui.core.host import HostState
    from heet_tui.core.snapshot import HostStatus

    changed = HostStatus("c", HostState.HOST_KEY_CHANGED, "HOST KEY CHANGED for [10.0.0.5]:22: it now presents X")
    assert why_lost("unreachable: connection lost", changed) == ("host-key-changed: HOST KEY CHANGED for "
                                                                 "[10.0.0.5]:22: it now presents X")
    assert why_lost("unreachable: connection lost", HostStatus("c", HostState.CONNECTING, "retrying")) == \
        "unreachable: connection lost"
    assert why_lost("unreachable: connection lost", None) == "unreachable: connection lost"
