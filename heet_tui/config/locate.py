"""Line numbers for values that tomllib parsed without positions.

tomllib gives no positions, yet a user needs "line 14" to fix a file. The host list is a
simple shape (``[defaults]`` and ``[[hosts]]`` tables), so scanning the text for table
headers and ``key =`` lines recovers the position of everything we validate.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


class LineIndex:
    """Where each ``[[name]]`` table (by occurrence) and each key in it starts."""

    def __init__(self, text: str) -> None:
        self._tables: list[tuple[str, int, dict[str, int]]] = []  # (header, line, {key: line})
        current: dict[str, int] | None = None
        in_multiline = False
        for number, line in enumerate(text.splitlines(), start=1):
            if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                in_multiline = not in_multiline
                if not in_multiline:
                    continue
            if in_multiline:
                continue
            header = _HEADER.match(line)
            if header and not _KEY.match(line):
                current = {}
                self._tables.append((header.group(1).strip(), number, current))
                continue
            key = _KEY.match(line)
            if key and current is not None:
                current.setdefault(key.group(1).strip('"'), number)

    def table_line(self, name: str, occurrence: int = 0) -> int | None:
        found = [line for header, line, _ in self._tables if header == name]
        return found[occurrence] if occurrence < len(found) else None

    def key_line(self, name: str, occurrence: int, key: str) -> int | None:
        tables = [(line, keys) for header, line, keys in self._tables if header == name]
        if occurrence >= len(tables):
            return None
        line, keys = tables[occurrence]
        if key in keys:
            return keys[key]
        # A nested table such as ``[hosts.emulate]`` belongs to the enclosing [[hosts]] entry.
        for header, sub_line, _ in self._tables:
            if header == f"{name}.{key}" and sub_line > line:
                return sub_line
        return line
