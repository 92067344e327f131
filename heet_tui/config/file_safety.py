"""Files whose contents decide what runs as the user must be the user's alone.

A hosts file names the interpreter, working directory and SSH settings of every host; an SSH
config can name a ProxyCommand. Another local user able to write one runs code as you: with a
permissive umask (or a shared group), a ``python = "/tmp/evil.sh"`` added to the hosts file ran
as the controller's user at its next reload. OpenSSH refuses such a config ("Bad owner or
permissions"); so does heet-tui, for these files, with the same rule: owned by you (or root),
writable by nobody else (a group-writable file only when the group is your own primary group and
a user-private group, as with a umask of 002: named as you, with no other member; a shared primary
group such as ``users`` let its members edit the hosts file, and the controller ran their python).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import tempfile
from pathlib import Path


def others_can_write(path: Path, st: os.stat_result | None = None) -> str | None:
    """Why someone other than the user could change ``path`` or swap it in its directory (any
    directory above it, as sshd's StrictModes checks a home); None when nobody can. ``st``: the
    status of the file as it was opened and read, where the caller has it."""
    try:
        st = st or path.stat()
    except OSError:
        return None  # missing or unreadable: the reader says so in its own words
    uid = os.getuid()
    if (link := planted_link(path)) is not None:
        return link
    if st.st_uid not in (uid, 0):
        return f"it is owned by {who(st.st_uid)}, not by you"
    if st.st_mode & stat.S_IWOTH:
        return "every user can write it"
    if st.st_mode & stat.S_IWGRP and not group_of_yours_alone(st.st_gid):
        return f"group {_group(st.st_gid)} can write it"
    above = unsafe_ancestor(path)
    return f"{above[0]} above it {above[1]}, so another user can replace it" if above else None


def planted_link(path: Path) -> str | None:
    """Why a link on the way to ``path`` is another user's to re-point, or None: the file it leads
    to was checked, and the link's owner could point it elsewhere between the check and the next
    read (a hosts file, SSH config or state directory given through such a link was taken)."""
    here = Path(os.path.abspath(path.expanduser()))
    for step in (*reversed(here.parents), here):
        try:
            st = os.lstat(step)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (os.getuid(), 0):
            return f"{step} on the way to it is a link {who(st.st_uid)} made, which they may point elsewhere"
    return None


def unsafe_ancestor(path: Path) -> tuple[Path, str] | None:
    """The first directory above ``path`` (links resolved) through which another user could swap
    it, and why: one they own, or one they may write that is not sticky (as /tmp is). A hosts
    file in another user's directory was read, and saved through temp files they could replace."""
    try:
        parents = path.resolve().parents
    except OSError:
        return None
    for parent in parents:
        try:
            st = parent.stat()
        except OSError:
            return None
        sticky = st.st_mode & stat.S_ISVTX
        if st.st_uid not in (os.getuid(), 0):
            return parent, f"belongs to {who(st.st_uid)}"
        if st.st_mode & stat.S_IWOTH and not sticky:
            return parent, "may be written by every user (and is not sticky)"
        if st.st_mode & stat.S_IWGRP and not sticky and not group_of_yours_alone(st.st_gid):
            return parent, f"may be written by group {_group(st.st_gid)} (and is not sticky)"
    return None


def group_of_yours_alone(gid: int) -> bool:
    """Whether ``gid`` is your primary group and a user-private one: named as you, listing no other
    member, and nobody else's primary group (as far as the user database lists its users)."""
    if gid != os.getgid():
        return False
    try:
        me, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(gid)
    except KeyError:
        return False
    if group.gr_name != me or set(group.gr_mem) - {me}:
        return False
    return not any(p.pw_gid == gid and p.pw_uid != os.getuid() for p in pwd.getpwall())


def who(uid: int) -> str:
    """"bob (uid 1001)", or "uid 1001" where no user has that id."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def read_private(path: Path) -> str:
    """The text of a file whose contents run as the user, refused (ConfigError) where another
    user could change or swap it; checked as read, not by name afterwards."""
    from heet_tui.config.errors import ConfigError, read_config_file

    text, st = read_config_file(path)
    if (why := others_can_write(path, st)) is not None:
        raise ConfigError(path, refusal(path, why))
    return text


def refusal(path: Path, why: str) -> str:
    if "on the way to it is a link" in why:  # chmod follows the link: it was the advice, and changed nothing
        fix = "use the file's own path, or a link of your own in its place (ln -sfn TARGET LINK as you)"
    elif "owned by" in why:  # chmod cannot make it yours: it was the advice
        fix = f"copy it to a file of your own (cp {path} ~/.config/heet-tui/hosts.toml) and use that"
    elif "above it" in why:
        fix = "keep it in a directory only you (and root) control"
    else:
        fix = f"make it yours alone: chmod go-w {path}"
    return f"refused: {why}, and what it says runs as you (hosts' python, workdir, SSH settings); {fix}"


def make_private_dirs(directory: Path) -> None:
    """``directory`` and the missing ones above it, each the user's alone: made 0777 under a umask
    of 000 (``~/.config``, ``~/.local/state``), they let anyone swap what heet-tui then wrote in
    them, and the state directory below was refused for the parent heet-tui had just made."""
    missing = [d for d in (directory, *directory.parents) if not d.exists()]
    for each in reversed(missing):
        each.mkdir(mode=0o700, exist_ok=True)


def write_private(path: Path, text: str) -> None:
    """Write ``path`` whole, 0600, through a fresh name beside it (a predictable one was followed
    if someone planted a link there); a directory it makes for it is the user's alone, whatever
    the umask (``~/.config/heet-tui``)."""
    make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
