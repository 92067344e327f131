"""An agent channel to a shell script that plays the agent's part: what it prints is what the
controller reads (a banner, replies, events), with no SSH and no real agent."""

from __future__ import annotations

import asyncio

from heet_tui.cluster.channel import AgentChannel


async def script_channel(script: str, description: str, limit: int = 1 << 16) -> AgentChannel:
    proc = await asyncio.create_subprocess_exec("sh", "-c", script, stdin=asyncio.subprocess.PIPE, limit=limit,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def closer() -> None:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()

    return AgentChannel(proc.stdout, proc.stdin, proc.stderr, closer, description)
