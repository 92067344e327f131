"""An agent that dies before its banner: the failure must carry the reason it wrote to stderr,
even when that reason arrives after stdout has already closed (as over SSH on a busy host)."""

from __future__ import annotations

import asyncio
import json

import pytest
from heet_agent.protocol import PROTOCOL_VERSION
from support.script_agent import script_channel

from heet_tui.cluster.agent_client import AgentClient
from heet_tui.cluster.errors import AgentFailure


async def _handshake_with(script: str, limit: int = 1 << 16) -> str:
    channel = await script_channel(script, "sh on h1", limit)
    client = AgentClient(channel, "h1", on_event=lambda _: None, link_alive=lambda: True)
    try:
        with pytest.raises(AgentFailure) as failure:
            await client.handshake({}, timeout_s=10)
    finally:
        await channel.close()
    return str(failure.value)


def test_the_reason_written_after_stdout_closed_is_in_the_failure() -> None:
    # stdout closes at once; the reason follows 0.2 s later on stderr (the order a lost race gives).
    message = asyncio.run(_handshake_with('exec 1>&-; sleep 0.2; echo "python3: not found" >&2'))
    assert message == "the agent exited before its banner: python3: not found"


def test_a_process_that_keeps_stderr_open_does_not_hold_the_failure_back() -> None:
    # stdout closed, stderr still open long after: the failure comes without a reason, not never.
    message = asyncio.run(asyncio.wait_for(_handshake_with("exec 1>&-; exec sleep 30"), 20))
    assert message == "the agent exited before its banner"


def test_a_line_over_the_read_limit_is_said_as_such_not_as_a_lost_connection() -> None:
    # As an agent declared to have 99,999 emulated GPUs did: "connection to h1 lost (ValueError:
    # Separator is not found, and chunk exceed the limit)" sent the user looking at the network.
    banner = json.dumps({"event": "agent_start", "protocol": PROTOCOL_VERSION})
    message = asyncio.run(_handshake_with(f"echo '{banner}'; head -c 5000 /dev/zero | tr '\\0' x; echo; sleep 5",
                                          limit=1024))
    assert message.startswith("the agent sent a line longer than the controller reads"), message
