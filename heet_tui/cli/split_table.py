"""A results table that stays readable on a narrow terminal: columns that do not fit go to a
second table (the key column repeated) instead of being squeezed to "heet…" and "3.7/…", where
heet and heet-lookahead could not be told apart."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PIPED_WIDTH = 160  # a file or pipe gets one wide table unless COLUMNS says otherwise


def _width(columns: Sequence[str], rows: Sequence[Sequence[str]], picked: Sequence[int]) -> int:
    """Characters a rich table with the default box needs for these columns, none cut."""
    cells = [max([len(columns[i]), *(len(r[i]) for r in rows)]) for i in picked]
    return sum(cells) + 3 * len(cells) + 1


def column_groups(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int, keys: int = 1) -> list[list[int]]:
    """The columns of each table, in order, each group led by the first ``keys`` columns."""
    groups: list[list[int]] = []
    current = list(range(keys))
    for i in range(keys, len(columns)):
        if len(current) > keys and _width(columns, rows, [*current, i]) > width:
            groups.append(current)
            current = list(range(keys))
        current.append(i)
    groups.append(current)
    return groups


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], keys: int = 1) -> None:
    from rich.console import Console
    from rich.table import Table

    narrow = sys.stdout.isatty() or "COLUMNS" in os.environ  # rich reads COLUMNS, else the terminal
    console = Console(file=sys.stdout, width=None if narrow else PIPED_WIDTH)
    groups = column_groups(columns, rows, console.width, keys)
    for n, group in enumerate(groups):
        part = f" ({n + 1}/{len(groups)})" if len(groups) > 1 else ""
        table = Table(title=title + part)
        for i in group:
            table.add_column(columns[i], justify="left" if i < keys else "right", no_wrap=True)
        for row in rows:
            table.add_row(*(row[i] for i in group))
        console.print(table)
