"""Config errors that name the file, the line (where known), the host and the key."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path

from heet_tui.core.escaped import escaped


class ConfigError(ValueError):
    """A problem in a user's TOML file; ``str()`` is the one-line message to show them.

    Format: ``hosts.toml:14: host "gpu3": unknown key "gpu" (did you mean "gpus"?)``.
    """

    def __init__(self, path: Path | str, message: str, line: int | None = None, subject: str = "") -> None:
        self.path = Path(path)
        self.line = line
        self.subject = subject
        self.detail = message
        super().__init__(self.naming(self.path.name))

    def naming(self, file: str) -> str:
        """The message with the file called ``file``: its name alone reads best, but two files
        of one name (``a/job.toml`` and ``b/job.toml`` in one submit) need the path to tell apart."""
        where = f"{file}:{self.line}" if self.line else file
        # names and keys from the file are the user's, or whoever wrote a spec they were given:
        # an escape sequence in one retitled the terminal, cleared it, or could set its clipboard
        said = f"{where}: {self.subject + ': ' if self.subject else ''}{self.detail}"
        return escaped(said.replace("\n", "\\n"))  # right-to-left marks too: they reversed the line


class ConcurrentModification(ConfigError):
    """The file changed on disk after it was loaded; saving would lose someone's edit."""


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


MAX_CONFIG_BYTES = 4 << 20  # hosts files, job specs, cluster files: hundreds of hosts fit in 100 KB
_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def toml_syntax_error(path: Path, exc: Exception, source: str | None = None) -> ConfigError:
    """tomllib puts the position at the end of its message; move it to the front. ``source``: the
    text parsed, to quote the line of a key given twice."""
    text = str(exc)
    match = _TOML_POS.search(text)
    line = int(match.group(1)) if match else None
    message = _TOML_POS.sub("", text).strip()
    if match:
        message = f"{message} (column {match.group(2)})"
    lines = source.splitlines() if source is not None else []
    if "cannot overwrite a value" in message.lower() and line is not None and 0 < line <= len(lines):
        message += f": a key given twice ({lines[line - 1].strip()[:80]!r})"  # it named no key
    return ConfigError(path, f"TOML syntax error: {message}", line)


def parse_toml(text: str, path: Path, empty_hint: str) -> dict:
    """Parse a user's TOML file; an empty file or a syntax error is a located ConfigError."""
    if not text.strip():
        raise ConfigError(path, f"the file is empty; {empty_hint}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_syntax_error(path, exc, text) from None
    except RecursionError:  # arrays or tables nested ~1000 deep: a traceback from every command
        raise ConfigError(path, NESTED_TOO_DEEP) from None


NESTED_TOO_DEEP = "arrays or tables nested too deep to read (hundreds of levels deep)"


def decode_utf8(path: Path, data: bytes) -> str:
    """The text, without the byte-order mark some Windows editors put first (TOML refused it as
    "Invalid statement (column 1)", with no word of why)."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8", line
        ) from None


def read_config_text(path: Path) -> str:
    return read_config_file(path)[0]


def read_config_file(path: Path) -> tuple[str, os.stat_result]:
    """The text, and the status of the very file it was read from (checked by ownership: a file
    swapped in between a read and a ``stat`` by path was taken, checked as the other one)."""
    try:
        if path.exists() and not path.is_dir() and not path.is_file():  # reading a named pipe waits for ever
            raise ConfigError(path, f"{path.expanduser().absolute()} is not a regular file (a pipe or device?)")
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:  # a 200 MB "spec" took 15 s and 450 MB to read, then queued
            raise ConfigError(path, f"{path.expanduser().absolute()} is over {MAX_CONFIG_BYTES >> 20} MiB: "
                              "not a hand-written TOML file (the wrong file given?)")
    except FileNotFoundError:
        raise ConfigError(path, f"file not found (looked for {path.expanduser().absolute()})") from None
    except IsADirectoryError:
        raise ConfigError(path, f"{path.expanduser().absolute()} is a directory, expected a TOML file") from None
    except PermissionError:
        raise ConfigError(path, f"permission denied (reading {path.expanduser().absolute()})") from None
    except OSError as exc:  # a link to itself, an I/O error: said, not a traceback
        raise ConfigError(path, f"cannot read it: {exc.strerror or exc}") from None
    return decode_utf8(path, data), st
