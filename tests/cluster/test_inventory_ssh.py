"""Deploy the agent over real SSH to three hosts that emulate different GPU types."""

from __future__ import annotations

import asyncio

from helpers import make_cluster

from heet_tui.core.host import HostState


def test_three_emulated_hosts_deploy_and_report_inventory(lab):
    a, b, c = (lab.add_host(n) for n in ("t4-a", "rtx-b", "a100-c"))
    path = lab.hosts_toml([
        lab.entry_for(a, emulate={"gpu_type": "T4", "count": 4, "speed": 0.25}),
        lab.entry_for(b, emulate={"gpu_type": "RTX2080Ti", "count": 8, "speed": 0.5}, gpus=[0, 1, 2]),
        lab.entry_for(c, emulate={"gpu_type": "A100", "count": 2, "speed": 1.0}),
    ])

    async def scenario():
        cluster = make_cluster(path)
        await cluster.start()
        try:
            assert await cluster.wait_settled(timeout=30)
            return {s.name: s for s in cluster.status()}
        finally:
            await cluster.stop()

    status = asyncio.run(scenario())
    assert all(s.state is HostState.READY for s in status.values()), {n: s.message for n, s in status.items()}
    assert [g.gpu_type for g in status["t4-a"].gpus] == ["T4"] * 4
    assert [g.index for g in status["rtx-b"].gpus] == [0, 1, 2]  # the hosts file's gpus limit what heet uses
    assert {g.gpu_type for g in status["a100-c"].gpus} == {"A100"}
    assert all(s.gpu_source == "emulated" for s in status.values())
    assert all(g.source == "emulated" for s in status.values() for g in s.gpus)
    assert all(s.rtt_ms is not None and s.rtt_ms > 0 for s in status.values())
    # deployed once, under its content-hash name, in each host's own workdir
    for server in (a, b, c):
        agents = list(server.workdir.glob("heet-agent-*.pyz"))
        assert len(agents) == 1
        assert agents[0].stat().st_mode & 0o777 == 0o600, "uploaded over SFTP, private (it took the umask)"
        # the agent's state, logs and lock are private to the user
        assert server.workdir.stat().st_mode & 0o777 == 0o700
        assert all(d.stat().st_mode & 0o777 == 0o700 for d in (server.workdir / "hosts").iterdir())
        assert (server.workdir / "hosts" / server.name / "agent.log").read_text().count("starting") == 1
        assert (server.workdir / "hosts" / server.name / "agent.log").stat().st_mode & 0o777 == 0o600
        assert (server.workdir / "hosts" / server.name / "agent.lock").stat().st_mode & 0o777 == 0o600
