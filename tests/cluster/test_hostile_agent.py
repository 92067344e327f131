"""What a compromised host's agent can make the controller do, held within bounds (a security
review played one through a wrapper in place of the real agent)."""

from __future__ import annotations

import asyncio

from heet_tui.cluster.options import ClusterOptions
from heet_tui.cluster.supervisor import MAX_JOBS_KEPT, HostSupervisor
from heet_tui.config.hosts_file import HostEntry

BOX = HostEntry("box", "127.0.0.1")


def test_an_agent_reporting_endless_jobs_is_held_to_a_bounded_table() -> None:
    """A compromised agent sent 3,000 new ended jobs every 0.2 s: the controller grew to 686 MB,
    and every heartbeat walked the whole table."""
    sup = HostSupervisor(BOX, None, ClusterOptions(), lambda event: None, asyncio.Semaphore(1))
    live = {"job_id": "live.r0.4a146a78", "generation": 1, "state": "running", "gpus": [0]}
    sup._on_heartbeat({"event": "heartbeat", "jobs": [live]})
    for wave in range(5):
        sup._on_heartbeat({"event": "heartbeat", "jobs": [
            {"job_id": f"x{wave}-{i}.r0.4a146a78", "generation": 1, "state": "exited", "exit_code": 0}
            for i in range(3000)]})
    assert len(sup.jobs) <= MAX_JOBS_KEPT
    assert ("live.r0.4a146a78", 1) in sup.jobs, "a running job is never the one let go"


def test_what_an_agent_sends_reaches_nobody_able_to_drive_a_terminal() -> None:
    """A GPU name and a warning holding ESC]0;...BEL ESC[2J retitled the admin's window and wiped
    the TUI; printed by `status`, the same. A NaN rate broke the observations table."""
    import json

    from heet_agent.protocol import PROTOCOL_VERSION
    from support.script_agent import script_channel

    from heet_tui.cluster.agent_client import AgentClient

    hostile = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mA100\u202e\x00"
    banner = json.dumps({"event": "agent_start", "protocol": PROTOCOL_VERSION})
    answer = json.dumps({"id": 1, "ok": True, "result": {"inventory": {"gpus": [{"index": 0, "name": hostile}],
                                                                        "warnings": [hostile]}}})
    event = json.dumps({"event": "progress", "job_id": "a.r0.4a146a78", "progress": {"samples_per_s": float("nan"),
                                                                                      hostile: 1}})
    script = f"echo '{banner}'; read hello; echo '{answer}'; echo '{event}'; sleep 2"
    events: list[dict] = []

    async def scenario() -> dict:
        channel = await script_channel(script, "sh on evil")
        client = AgentClient(channel, "evil", on_event=events.append, link_alive=lambda: True)
        try:
            result = await client.handshake({}, timeout_s=10)
            for _ in range(50):
                if events:
                    break
                await asyncio.sleep(0.05)
            return result
        finally:
            await client.close()

    result = asyncio.run(scenario())
    said = json.dumps([result, events], ensure_ascii=False)
    assert "\x1b" not in said and "\x07" not in said and "\u202e" not in said and "\x00" not in said
    assert result["inventory"]["gpus"][0]["name"] == "A100\\u202e\\x00", "sequences dropped, the rest escaped"
    assert events and events[0]["progress"]["samples_per_s"] is None


def test_an_inventory_is_held_to_sizes_a_real_host_has() -> None:
    """7,000 claimed GPUs drew every job to the host; 400 KB names and warnings rode every snapshot."""
    from heet_tui.cluster.gpu_inventory import MAX_GPUS, MAX_NAME, MAX_TEXT, MAX_WARNINGS, read_inventory

    name, uuid = "NVIDIA A100" + "x" * 400_000, "GPU-" + "u" * 400_000  # one of each, shared (5.6 GB apart)
    raw = [{"index": i, "name": name, "uuid": uuid} for i in range(7000)]
    _, gpus, warnings = read_inventory(BOX, {"source": "nvml", "gpus": raw, "warnings": ["w" * 400_000] * 1000},
                                       lambda real_type: [])
    assert len(gpus) == MAX_GPUS and all(len(g.gpu_type) <= MAX_NAME and len(g.uuid) <= MAX_NAME for g in gpus)
    assert f"the agent lists 7000 GPUs: only the first {MAX_GPUS} are used" in warnings
    assert len(warnings) <= MAX_WARNINGS + 2 and all(len(w) <= MAX_TEXT for w in warnings)


def test_an_agent_failing_each_session_at_once_is_backed_off_more_each_time(monkeypatch) -> None:
    """An agent that answered hello and then sent a line the controller refuses was logged in to
    twice a second for ever (57 sessions in 28 s), the pace fail2ban bans."""
    from heet_tui.cluster import supervisor
    from heet_tui.cluster.errors import AgentFailure

    def run_sessions() -> list[int]:
        class Client:  # and transport: all the loop does with them between sessions is close them
            async def close(self) -> None:
                pass

        sup = HostSupervisor(BOX, Client(), ClusterOptions(), lambda event: None, asyncio.Semaphore(1))
        waits: list[int] = []

        async def attempt(_: int) -> Client:
            return Client()

        async def serve(_: Client) -> AgentFailure:
            return AgentFailure("agent sent a non-protocol line")

        async def backoff(attempt: int, fixed_s: float | None = None) -> None:
            waits.append(attempt)
            sup._stopping = len(waits) >= 5

        monkeypatch.setattr(sup, "_attempt", attempt)
        monkeypatch.setattr(sup, "_serve", serve)
        monkeypatch.setattr(sup, "_backoff", backoff)
        asyncio.run(sup.run())
        return waits

    assert run_sessions() == [2, 3, 4, 5, 6], "each short session counts as one more failed attempt"
    monkeypatch.setattr(supervisor, "SHORT_SESSION_S", 0.0)  # sessions that lasted: a link that dropped
    assert run_sessions() == [1, 1, 1, 1, 1]


def test_each_failed_attempt_waits_twice_as_long_up_to_the_cap_with_jitter() -> None:
    """What the attempt numbers above turn into (the test above stands in for the wait itself)."""
    options = ClusterOptions(backoff_initial_s=1.0, backoff_max_s=30.0)
    assert [options.backoff_s(n, 1.0) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert options.backoff_s(3, 0.5) == 2.0, "jitter takes up to half off"
    assert options.backoff_s(40, 1.0) == 30.0


def test_a_message_nested_too_deep_is_the_agents_fault_not_a_lost_link() -> None:
    import json

    from heet_agent.protocol import PROTOCOL_VERSION
    from support.script_agent import script_channel

    from heet_tui.cluster.agent_client import AgentClient

    banner = json.dumps({"event": "agent_start", "protocol": PROTOCOL_VERSION})
    answer = json.dumps({"id": 1, "ok": True, "result": {}})
    deep = '{"event": "progress", "x": ' + "[" * 700 + "]" * 700 + "}"  # JSON reads it; inert() did not
    script = f"echo '{banner}'; read hello; echo '{answer}'; echo '{deep}'; sleep 5"

    async def scenario() -> str:
        channel = await script_channel(script, "sh on evil")
        client = AgentClient(channel, "evil", on_event=lambda e: None, link_alive=lambda: True)
        try:
            await client.handshake({}, timeout_s=10)
            return str(await asyncio.wait_for(client.closed, 10))
        finally:
            await client.close()

    said = asyncio.run(scenario())
    assert "nested too deep" in said and "lost" not in said, said
