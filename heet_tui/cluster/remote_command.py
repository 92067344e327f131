"""Shell command lines run on hosts, built only from validated values and ``shlex.quote``.

Nothing from the hosts file reaches a remote shell unquoted; values that could never be
legitimate (newlines, NULs, option-like names) are refused with a message naming the host.
"""

from __future__ import annotations

import re
import shlex

from heet_tui.config.fields import SAFE_PYTHON

_FILE_NAME = re.compile(r"^heet-agent-[0-9a-f]{16}\.pyz\Z")
NEED_AGENT = '{"event":"need_agent"}'


class UnsafeValue(ValueError):
    """A hosts-file value that cannot be put on a remote command line."""


def check_python(host: str, python: str) -> str:
    if not SAFE_PYTHON.match(python):
        raise UnsafeValue(f'host "{host}": python = "{python}" is not a command name or path')
    return python


def check_workdir(host: str, workdir: str) -> str:
    """Quoting holds in sh, bash and zsh for any character; fish reads ``\\'`` inside single
    quotes as a quote (a workdir could end the quoting and run a command) and tcsh expands ``!``
    even there, so those two characters are refused with the control ones."""
    if not workdir or any(c in workdir for c in "\n\r\0\\!") or workdir.startswith("-"):
        raise UnsafeValue(f'host "{host}": workdir = {workdir!r} is not a usable directory '
                          "(no backslash, !, line break or leading -)")
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


NOT_YOURS = ("is not yours alone (another user owns it, or its group or others may write it): the agent is not "
             "run from it; give the host a workdir only you can write")


def enter_workdir(workdir: str) -> str:
    """``cd`` into the work dir, creating it only when it is missing (no ``mkdir`` process per
    start), and refuse one that others may write: the agent file there is found by a name anyone
    can work out, so a file planted in a shared workdir (``/tmp/heet``) ran as the user."""
    wd = shell_path(workdir.rstrip("/") or "/")
    mine = '[ -O . ] && [ -z "$(find . -prune \\( -perm -020 -o -perm -002 \\))" ]'
    refuse = f'{{ echo "heet-tui: workdir $(pwd) {NOT_YOURS}" >&2; exit 3; }}'
    # a link someone else planted at the path (in /tmp, say) led to a directory of the user's that
    # passed "-O ." (a test of the target): the agent made it 0700 and filled it with its files
    link = (f'{{ [ ! -L {wd} ] || [ -n "$(find {wd} -prune -user "$(id -u)" 2>/dev/null)" ] || '
            f'{{ echo "heet-tui: workdir {_said(workdir)} is a link someone else made: the agent is not run '
            f'through it; give the host a workdir only you can write" >&2; exit 3; }}; }}')
    # each directory above it, as sshd's StrictModes checks a home: one another user owns (or a
    # link of theirs on the way, which -P resolves to their directory) lets them rename the
    # workdir away and put their own in its place; /tmp's sticky bit stops others doing that
    above = ('d=$(pwd -P); while [ "$d" != / ]; do d=$(dirname "$d"); '
             '[ -n "$(find "$d" -prune \\( -user 0 -o -user "$(id -u)" \\) ! \\( -perm -002 ! -perm -1000 \\) '
             '! \\( -perm -020 ! -perm -1000 ! -group "$(id -g)" \\))" ] || '
             '{ echo "heet-tui: workdir $(pwd -P): $d above it belongs to another user, or others (or a group '
             'not your own) may write it without the sticky bit: the agent is not run from it; give the host a '
             'workdir only you and root control" >&2; exit 3; }; done')
    return (f"{link} && {{ cd {wd} 2>/dev/null || {{ (umask 077 && mkdir -p {wd}) && cd {wd}; }}; }} && "
            f"{{ {mine} || {refuse}; }} && {{ {above}; }}")


def _said(path: str) -> str:
    """``path`` as a double-quoted shell word's text: printed as written, never expanded."""
    return "".join(c if c.isalnum() or c in "/._-~+,:@" else "?" for c in path)


def start_agent(python: str, workdir: str, file_name: str, host: str, check_only: bool = False) -> str:
    """Run the agent if it is there; otherwise print the ``need_agent`` line and wait.

    One exec channel does everything: the unpacked agent (what a previous start left next to
    the .pyz) or the .pyz is started at once; when neither is there the shell prints
    ``need_agent``, and each line the controller then sends (after it deployed the file over
    SFTP or ``cat``) makes it look again, so a first deploy costs no second session and shell.
    EOF on stdin ends the wait. ``check_only`` starts an agent that reports the host and leaves
    the running agent (and its jobs) alone.
    """
    name, py = shlex.quote(_check_file(file_name)), shell_path(python)  # ~/miniconda3/bin/python: ~ expanded
    unpacked = shlex.quote(f"{file_name[:-4]}.d/__main__.py")
    args = f"--workdir . --host {shlex.quote(host)}" + (" --check-only" if check_only else "")
    run = (f"if [ -f {unpacked} ]; then exec {py} {unpacked} {args}; fi; "
           f"if [ -f {name} ]; then exec {py} {name} {args}; fi; echo {shlex.quote(NEED_AGENT)}")
    return f"{enter_workdir(workdir)} && {{ {run}; while read -r _; do {run}; done; }}"


def in_sh(command: str) -> str:
    """``command`` run by ``/bin/sh`` whatever the user's login shell is: sshd hands an exec
    request to that shell, and the commands here are POSIX, which tcsh ("Badly placed ()'s", a
    common login shell on older HPC sites) and fish refuse. ``exec /bin/sh -c '...'`` reads the
    same in sh, bash, zsh, tcsh and fish."""
    return f"exec /bin/sh -c {shlex.quote(command)}"


def upload_with_cat(workdir: str, file_name: str) -> str:
    """Write stdin to the agent file atomically (for hosts whose sshd has no SFTP subsystem)."""
    wd, name = shell_path(workdir), shlex.quote(_check_file(file_name))
    tmp = f"{name}.tmp.$$"  # removed when the upload fails (a full disk left one per attempt)
    return f"umask 077 && mkdir -p {wd} && cd {wd} && {{ cat > {tmp} && mv -f {tmp} {name} || {{ rm -f {tmp}; exit 1; }}; }}"
