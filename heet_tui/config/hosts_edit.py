"""Edit the host list in place with tomlkit, keeping the user's comments and layout.

Untouched parts stay byte-identical. Every save re-parses and validates the result with the
same checks as loading, refuses when the file changed on disk since it was loaded (someone's
edit would be lost), keeps a ``.bak`` and replaces the file atomically.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Array, Table

from heet_tui.config.errors import ConcurrentModification, ConfigError, read_config_file
from heet_tui.config.file_safety import others_can_write, read_private, refusal
from heet_tui.config.hosts_file import HOST_KEYS, HostsFile, parse_hosts_text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class HostsDocument:
    """A loaded hosts file that can be changed and saved back safely."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self._loaded_digest = _digest(text)
        self.validated: HostsFile = parse_hosts_text(text, path)
        try:
            self._doc = tomlkit.parse(text)
        except TOMLKitError as exc:  # tomllib accepted it, so this is unlikely; still never a traceback
            raise ConfigError(path, f"cannot edit this file: {exc}") from None

    @classmethod
    def load(cls, path: Path | str) -> HostsDocument:
        """Refused where another user could change the file or swap it (and the temp files a save
        writes beside it): its python and workdir run as you, as in load_hosts."""
        path = Path(path)
        return cls(path, read_private(path))

    def text(self) -> str:
        return tomlkit.dumps(self._doc)

    def _hosts(self) -> AoT:
        hosts = self._doc.get("hosts")
        if hosts is None:
            hosts = tomlkit.aot()
            self._doc.append("hosts", hosts)
        if not isinstance(hosts, AoT):
            raise ConfigError(self.path, 'cannot edit "hosts" written as an inline array; use [[hosts]] tables')
        return hosts

    def _find(self, name: str) -> tuple[int, Table]:
        for i, table in enumerate(self._hosts()):
            if table.get("name") == name:
                return i, table
        raise ConfigError(self.path, f'no host named "{name}"')

    def _check(self) -> HostsFile:
        """Validate the edited document as a whole; on failure the edit is undone by the caller."""
        return parse_hosts_text(self.text(), self.path)

    def add_host(self, fields: Mapping[str, Any]) -> HostsFile:
        name = fields.get("name")
        if any(t.get("name") == name for t in self._hosts()):
            raise ConfigError(self.path, f'a host named "{name}" already exists', subject=f'host "{name}"')
        _reject_unknown(self.path, fields)
        table = tomlkit.table()
        for key, value in fields.items():
            if value is not None:
                table.add(key, _toml_value(value))
        before = self.text()
        hosts = self._hosts()
        if len(hosts) and not self.text().endswith("\n\n"):
            hosts[len(hosts) - 1].add(tomlkit.nl())  # a blank line between tables, as people write them
        hosts.append(table)
        try:
            self.validated = self._check()
        except ConfigError as exc:
            self._doc = tomlkit.parse(before)  # the blank line put before it goes too
            if exc.line is not None and exc.line > self.text().count("\n") + 1:
                # in the lines the new host would have had: "hosts.toml:43" named a line the file does not have
                said = f"{exc.subject}: {exc.detail}" if exc.subject else exc.detail
                raise ConfigError(self.path, f"{said}; nothing was added") from None
            raise
        return self.validated

    def update_host(self, name: str, fields: Mapping[str, Any]) -> HostsFile:
        """Set keys of one host; a value of ``None`` removes that key, and a table (``emulate``)
        sets only the keys it names in the host's table: the form changed a count, and the speed
        tuned by hand in the file meanwhile went back to the form's."""
        _reject_unknown(self.path, fields)
        _, table = self._find(name)
        text_before = self.text()
        for key, value in fields.items():
            if value is None:
                if key in table:
                    del table[key]
            elif key in table and isinstance(value, Mapping) and isinstance(table[key], Mapping):
                # key by key, and only those that change: replaced whole, a [hosts.emulate] table
                # became an inline one, and its comments and the comment after it were lost
                for sub, v in value.items():
                    if sub not in table[key] or table[key][sub] != v:
                        table[key][sub] = v
            elif key in table and isinstance(table[key], Array) and isinstance(value, list | tuple):
                if not _edit_array(table[key], list(value)):
                    table[key] = _toml_value(value)
            elif key in table:
                table[key] = _toml_value(value)
            else:
                _add_key(table, key, _toml_value(value))
        try:
            self.validated = self._check()
        except ConfigError:
            self._doc = tomlkit.parse(text_before)
            raise
        return self.validated

    def remove_host(self, name: str) -> HostsFile:
        """Cut the host's lines out of the text rather than the tomlkit tree.

        tomlkit files the comments that introduce the *next* table under the previous one, so
        deleting a table from the tree would delete a comment about another host. Cutting from
        the ``[[hosts]]`` header to the last key line of the entry keeps every other byte.
        """
        i, _ = self._find(name)
        if len(self._doc.get("hosts", [])) <= 1:  # the file's own error named no path and no remedy
            raise ConfigError(self.path, f'cannot remove host "{name}": it is the only one, and a hosts file needs '
                              "one at least; add the host that replaces it first")
        text = self.text()
        lines = text.splitlines(keepends=True)
        start, end = _entry_span(lines, i)
        try:
            edited = tomlkit.parse("".join(lines[:start] + lines[end:]))
            self.validated = parse_hosts_text(tomlkit.dumps(edited), self.path)
        except TOMLKitError as exc:
            raise ConfigError(self.path, f'cannot remove host "{name}": {exc}') from None
        self._doc = edited
        return self.validated

    def save(self) -> HostsFile:
        """Write atomically (temp file + ``os.replace``), keeping the previous file as ``.bak``."""
        try:
            on_disk, st = read_config_file(self.path)
        except ConfigError:
            on_disk = None
        else:  # checked again: its directory may have been opened to others since the form was
            if (why := others_can_write(self.path, st)) is not None:
                raise ConfigError(self.path, refusal(self.path, why) + "; nothing was saved")
        if on_disk is None or _digest(on_disk) != self._loaded_digest:
            raise ConcurrentModification(
                self.path, "changed on disk since it was loaded; nothing was saved (reload, then edit again)"
            )
        text = self.text()
        if text == on_disk or text == on_disk.replace("\r\n", "\n"):
            # nothing changed (Ctrl+S on an unchanged form): rewritten, the .bak of the last real
            # edit, the only way back, became a copy of the current file
            self.validated = parse_hosts_text(on_disk, self.path)
            return self.validated
        if "\r\n" in on_disk:  # a file written on Windows keeps its line ends; what tomlkit adds has "\n"
            text = re.sub(r"(?<!\r)\n", "\r\n", text)
        validated = parse_hosts_text(text, self.path)
        # a link (to a file kept in a repository, say) is written through: replaced, the link
        # became a file of its own and the repository's copy silently missed the edit
        target = Path(os.path.realpath(self.path))
        mode = target.stat().st_mode & 0o777
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        except OSError as exc:  # a traceback for a user who may write the file but not its directory
            raise ConfigError(self.path, f"cannot save: {target.parent} cannot be written ({exc.strerror}): the "
                              "file is saved through a new file beside it, so its directory must be writable; "
                              "nothing was saved") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                out.write(text)
                out.flush()
                os.fchmod(out.fileno(), mode)  # the file written, not whatever is at its name by then
                os.fsync(out.fileno())
            _write_backup(target.with_name(target.name + ".bak"), on_disk, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._loaded_digest = _digest(text)
        self.validated = validated
        return validated


def _edit_array(array: Array, new: list[Any]) -> bool:
    """Make ``array`` hold ``new`` by removing and appending items, where that gets there (the
    items kept in their order, the new ones last): rewritten whole, a multi-line list of tags lost
    its layout and the comments beside its items. False where ``new`` reorders it."""
    old = array.unwrap()
    if old == new:
        return True
    added = [v for v in new if v not in old]
    if [v for v in old if v in new] + added != new:
        return False
    for i in reversed(range(len(old))):
        if old[i] not in new:
            del array[i]
    for value in added:
        array.append(value)
    return True


def _add_key(table: Table, key: str, value: Any) -> None:
    """A new key goes after the host's last key, not after the blank lines and comments that end
    its table: tomlkit files there the comments that introduce the next host ("# --- slow box
    ---"), so the key landed under another host's banner, and removing that host later took the
    banner and every comment around it along."""
    body = table.value.body
    trailing = []
    while body and body[-1][0] is None:  # whitespace and comments after the last key
        trailing.insert(0, body.pop())
    table[key] = value
    body.extend(trailing)


def _write_backup(backup: Path, text: str, mode: int) -> None:
    """Written beside and renamed over: writing through the name followed a link planted there (in
    a directory others may write) onto whatever it pointed at, and chmod-ed that file too."""
    fd, tmp = tempfile.mkstemp(prefix=f".{backup.name}.", suffix=".tmp", dir=backup.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            os.fchmod(out.fileno(), mode)
        os.replace(tmp, backup)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_HOSTS_HEADER = re.compile(r"^\s*\[\[\s*hosts\s*\]\]")
_SUBTABLE = re.compile(r"^\s*\[\s*hosts\.")
_ANY_HEADER = re.compile(r"^\s*\[")


def _entry_span(lines: list[str], index: int) -> tuple[int, int]:
    """Line range of the ``index``-th ``[[hosts]]`` entry: the comment lines right above its header
    (what people write about a host goes there; left behind, it described the next host), the
    header, and its lines up to its last non-comment one."""
    headers = [n for n, line in enumerate(lines) if _HOSTS_HEADER.match(line)]
    header = start = headers[index]
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    if start == 0:
        start = header  # the comment atop the whole file is about the file, not this host
    end = header + 1
    while end < len(lines) and not (_ANY_HEADER.match(lines[end]) and not _SUBTABLE.match(lines[end])):
        end += 1
    # comments and blank lines just above the next table belong to that table
    while end > header + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    if end == len(lines):  # the last entry: no blank lines left trailing the file
        while start > 0 and not lines[start - 1].strip():
            start -= 1
    # keep one blank line between the tables that are left
    if end < len(lines) and not lines[end].strip() and start > 0 and not lines[start - 1].strip():
        end += 1
    return start, end


def _reject_unknown(path: Path, fields: Mapping[str, Any]) -> None:
    from heet_tui.config.errors import did_you_mean

    for key in fields:
        if key not in HOST_KEYS:
            raise ConfigError(path, f'unknown key "{key}"{did_you_mean(key, HOST_KEYS)}',
                              subject=f'host "{fields.get("name", "?")}"')


def _toml_value(value: Any) -> Any:
    if isinstance(value, Mapping):  # spaced inside the braces, as people (and configs/*.toml) write it
        body = ", ".join(f"{k} = {tomlkit.item(v).as_string()}" for k, v in value.items())
        return tomlkit.parse(f"x = {{ {body} }}\n")["x"]
    if isinstance(value, tuple):
        return list(value)
    return value
