"""Shell command lines run on hosts, built only from validated values and ``shlex.quote``.

Nothing from the hosts file reaches a remote shell unquoted; values that could never be
legitimate (newlines, NULs, option-like names) are refused with a message naming the host.
"""

from __future__ import annotations

import re
import shlex

_PYTHON = re.compile(r"^[A-Za-z0-9_./+~\-]+$")
_FILE_NAME = re.compile(r"^heet-agent-[0-9a-f]{16}\.pyz$")
NEED_AGENT = '{"event":"need_agent"}'


class UnsafeValue(ValueError):
    """A hosts-file value that cannot be put on a remote command line."""


def check_python(host: str, python: str) -> str:
    if not _PYTHON.match(python) or python.startswith("-"):
        raise UnsafeValue(f'host "{host}": python = "{python}" is not a command name or path')
    return python


def check_workdir(host: str, workdir: str) -> str:
    if not workdir or any(c in workdir for c in "\n\r\0") or workdir.startswith("-"):
        raise UnsafeValue(f'host "{host}": workdir = {workdir!r} is not a usable directory')
    return workdir


def shell_path(path: str) -> str:
    """A quoted path that still lets the remote shell expand a leading ``~`` to ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    return shlex.quote(path)


def sftp_path(path: str) -> str:
    """SFTP paths are relative to the login directory; ``~/x`` is just ``x`` there."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


def _check_file(name: str) -> str:
    if not _FILE_NAME.match(name):
        raise UnsafeValue(f"unexpected agent file name {name!r}")
    return name


def agent_state_dir(workdir: str, host: str) -> str:
    """Where the agent for hosts-file entry ``host`` keeps its state, lock, log and job logs."""
    return f"{workdir.rstrip('/')}/hosts/{host}"


def start_agent(python: str, workdir: str, file_name: str, host: str) -> str:
    """Run the agent if its file is there; otherwise print the ``need_agent`` line and exit.

    One round trip in the common case (agent already deployed) instead of a stat then a run.
    """
    wd, name, py = shell_path(workdir), shlex.quote(_check_file(file_name)), shlex.quote(python)
    return (f"mkdir -p {wd} && cd {wd} && if [ -f {name} ]; then exec {py} {name} --workdir . "
            f"--host {shlex.quote(host)}; else echo {shlex.quote(NEED_AGENT)}; fi")


def upload_with_cat(workdir: str, file_name: str) -> str:
    """Write stdin to the agent file atomically (for hosts whose sshd has no SFTP subsystem)."""
    wd, name = shell_path(workdir), shlex.quote(_check_file(file_name))
    return f"mkdir -p {wd} && cd {wd} && cat > {name}.tmp.$$ && mv -f {name}.tmp.$$ {name}"
