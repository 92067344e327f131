"""The sshd test fixture (``from support.sshd import SshLab``); implemented in the package so the
connect benchmark can use the very same servers."""

from heet_tui.cluster.loopback_sshd import (  # noqa: F401
    SSHD,
    SshdServer,
    SshLab,
    free_port,
    kill_jobs_under,
)
