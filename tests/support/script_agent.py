"""Scripts that play the agent's part: what they print is what the controller reads (a banner,
replies, events), with no SSH and no real agent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from heet_tui.cluster.channel import AgentChannel


async def script_channel(script: str, description: str, limit: int = 1 << 16) -> AgentChannel:
    proc = await asyncio.create_subprocess_exec("sh", "-c", script, stdin=asyncio.subprocess.PIPE, limit=limit,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def closer() -> None:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()

    return AgentChannel(proc.stdout, proc.stdin, proc.stderr, closer, description)


def host_run_by(tmp_path: Path, name: str, agent_source: str) -> Path:
    """A hosts file of one local host ``name`` whose ``python`` is ``agent_source`` (a Python
    script run in the agent's place, with one emulated T4 declared)."""
    fake = tmp_path / f"{name}-python"
    fake.write_text(agent_source)
    fake.chmod(0o755)
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[[hosts]]\nname = "{name}"\ntransport = "local"\npython = "{fake}"\n'
                     f'workdir = "{tmp_path / "w"}"\nemulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}\n')
    return hosts
