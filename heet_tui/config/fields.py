"""Typed field checks shared by the host list and job specs, each failing with a located message."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from heet_tui.config.errors import ConfigError, did_you_mean

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*\Z")
SAFE_USER = re.compile(r"^[a-z_][a-z0-9_.\-]*\$?\Z", re.IGNORECASE)
SAFE_ADDRESS = re.compile(r"^[A-Za-z0-9_.:\-\[\]%@]+\Z")
# [user@]host[:port], as the connection reads a jump host: the file's check took "@:x", which
# then failed at every connect
JUMP_SPEC = re.compile(r"^(?:(?P<user>[A-Za-z0-9_.\-]+)@)?(?P<host>[A-Za-z0-9_.\-%]+|\[[0-9A-Fa-f:.%]+\])"
                       r"(?::(?P<port>\d+))?\Z")
# quoted for the remote shell, but fish reads \' inside quotes and tcsh expands ! there (remote_command.py)
# and $: "$HOME/hw" made a directory named "$HOME" (variables are not expanded; ~/ is)
SAFE_WORKDIR = re.compile(r"^(?!-)[^\\!$\n\r\0]+\Z")
SAFE_PYTHON = re.compile(r"^(?!-)[A-Za-z0-9_./+~\-]+\Z")  # a command name or path: nothing a shell reads
PYTHON = "a command name or path (ASCII letters, digits and . _ / + ~ -, not starting with -)"
MAX_HOST_NAME = 128  # the agent refuses longer ones (remote/main.py)


class Fields:
    """Reads keys of one TOML table, knowing how to say where a bad value is."""

    def __init__(
        self, path: Path, table: Mapping[str, Any], subject: str, line_of: Callable[[str], int | None]
    ) -> None:
        self.path, self.table, self.subject, self.line_of = path, table, subject, line_of

    def error(self, key: str | None, message: str) -> ConfigError:
        line = self.line_of(key) if key else self.line_of("")
        return ConfigError(self.path, message, line, self.subject)

    def reject_unknown(self, allowed: set[str] | frozenset[str]) -> None:
        for key in self.table:
            if key not in allowed:
                raise self.error(key, f'unknown key "{key}"{did_you_mean(key, allowed)}')

    def _get(self, key: str, default: Any) -> Any:
        return self.table.get(key, default)

    def string(self, key: str, default: str | None = None, pattern: re.Pattern[str] | None = None,
               what: str = "") -> str | None:
        value = self._get(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, f'key "{key}": expected a string, got {_show(value)}')
        if "\0" in value:  # TOML's \u0000: no path, argument or name can hold one (it failed at launch)
            raise self.error(key, f'key "{key}": contains a NUL character (\\u0000)')
        if pattern is not None and not pattern.match(value):
            raise self.error(key, f'key "{key}": {_show(value)} is not {what or "a valid value"}')
        return value

    def required_string(self, key: str, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        if key not in self.table:
            raise self.error(None, f'missing required key "{key}"')
        value = self.string(key, pattern=pattern, what=what)
        assert value is not None
        if not value.strip():
            raise self.error(key, f'key "{key}": must not be empty')
        return value

    def integer(self, key: str, default: int | None, low: int | None = None, high: int | None = None) -> int | None:
        value = self._get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f'key "{key}": expected an integer, got {_show(value)}')
        if low is not None and value < low or high is not None and value > high:
            bounds = f"from {low} to {high}" if high is not None else f">= {low}"
            raise self.error(key, f'key "{key}": {value} is out of range (expected {bounds})')
        return value

    def number(self, key: str, default: float | None, positive: bool = False) -> float | None:
        value = self._get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.error(key, f'key "{key}": expected a number, got {_show(value)}')
        if positive and value <= 0:
            raise self.error(key, f'key "{key}": must be > 0, got {value}')
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f'key "{key}": expected true or false, got {_show(value)}')
        return value

    def string_list(self, key: str, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        value = self._get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f'key "{key}": expected a list of strings, got {_show(value)}')
        for v in value:
            if "\0" in v:
                raise self.error(key, f'key "{key}": {_show(v)} contains a NUL character (\\u0000)')
            if pattern is not None and not pattern.match(v):
                raise self.error(key, f'key "{key}": {_show(v)} is not a valid name')
        return tuple(value)

    def index_list(self, key: str) -> tuple[int, ...] | None:
        if key not in self.table:
            return None
        value = self.table[key]
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(key, f'key "{key}": expected a list of GPU indices, got {_show(value)}')
        if any(v < 0 for v in value):
            raise self.error(key, f'key "{key}": GPU indices must be >= 0, got {value}')
        if len(set(value)) != len(value):
            raise self.error(key, f'key "{key}": duplicate GPU index in {value}')
        return tuple(value)

    def table_of(self, key: str) -> Mapping[str, Any] | None:
        value = self._get(key, None)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f'key "{key}": expected a table, got {_show(value)}')
        return value


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # as TOML writes it: a newline shows as \n
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"a list {value!r}" if len(repr(value)) < 40 else "a list"
    if isinstance(value, datetime.date | datetime.time):  # a TOML date, unquoted: it read "datetime.date(1979, 5, 27)"
        return f"the date or time {value.isoformat()} (TOML reads it unquoted as one)"
    return repr(value)
