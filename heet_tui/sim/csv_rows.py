"""The one way the simulator reads its CSV inputs (workloads, traces, validation runs).

Columns are found by header name (their order differs between files) and every problem names
the file and line, so a user pointing the simulator at a broken file sees what to fix.
"""

from __future__ import annotations

import csv
import difflib
from collections.abc import Iterator
from pathlib import Path

from heet_tui.config.plain_files import read_plain_text
from heet_tui.sim.errors import SimInputError

CSV_LIMIT = 1 << 30  # a trace of millions of jobs is a few hundred MB; /dev/zero read until memory ran out


def read_rows(path: Path, label: str, required: tuple[str, ...], optional: tuple[str, ...] = (), *,
              what: str = "file", exact_width: bool = False) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line number, {column: stripped cell})`` for each non-blank data row.

    ``exact_width`` refuses rows with extra fields, and columns of other names, too (a workload
    row with a stray comma, or a misspelt column, is a mistake; the measured files and traces
    sometimes carry columns we do not use). A column named twice is refused in any file.
    """
    try:
        # "-sig": files saved by Excel start with a byte-order mark, which must not join the first column name.
        lines = read_plain_text(path, CSV_LIMIT, f"a {what}", encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:  # "'utf-8' codec can't decode byte 0xe9 in position 49", no line
        line = exc.object[:exc.start].count(b"\n") + 1
        raise SimInputError(f"{label}:{line}: not valid UTF-8 (byte {exc.object[exc.start]:#04x}); save the "
                            f"{what} as UTF-8") from None
    except OSError as exc:  # "[Errno 21] Is a directory: ..."
        raise SimInputError(f"{label}: cannot read {what}: {exc.strerror or exc}") from None
    if not any(line.strip() for line in lines):
        raise SimInputError(f"{label}:1: empty {what} (expected a header: {', '.join(required)})")
    reader = csv.reader(lines)
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as exc:
        raise SimInputError(f"{label}:1: {exc}") from None
    for name in (*required, *optional):
        if header.count(name) > 1:  # the first was used without a word
            raise SimInputError(f'{label}:1: column "{name}" appears {header.count(name)} times in the header')
    if exact_width:
        known = (*required, *optional)
        for name in header:  # "max_gpu" was skipped, and a capped job ran on every GPU it could get
            if not name:
                raise SimInputError(f"{label}:1: a column with no name in the header (a comma too many?)")
            if name not in known:
                close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)  # "Max_GPUs" too
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                raise SimInputError(f'{label}:1: unknown column "{name}"{hint}: a {what} has '
                                    f'{", ".join(required)} and optionally {", ".join(optional)}')
    missing = [c for c in required if c not in header]
    if missing:
        raise SimInputError(f"{label}:1: missing column(s) {', '.join(missing)} (header has: {', '.join(header)})")
    index = {c: header.index(c) for c in (*required, *optional) if c in header}
    for lineno, cells in enumerate(_rows(reader, label), start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) < len(header) or (exact_width and len(cells) != len(header)):
            raise SimInputError(f"{label}:{lineno}: {len(cells)} fields, header has {len(header)}")
        yield lineno, {c: cells[i].strip() for c, i in index.items()}


def _rows(reader: Iterator[list[str]], label: str) -> Iterator[list[str]]:
    """The reader's rows; a row it cannot read (a field over its 131,072-character limit) is an
    error naming the line, not a traceback."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise SimInputError(f"{label}:{getattr(reader, 'line_num', '?')}: {exc}") from None
        yield row
