"""A ``[sweep]`` table in a job file: one file, one job per combination of the values.

A learning-rate sweep was a directory of near-identical files, written by hand or by a shell
loop, each a chance for a typo in the part that did not change. Now::

    name = "cnn"                        # jobs cnn-lr0.01-seed1, cnn-lr0.01-seed2, ...
    script = "train.py"
    args = ["--lr", "{lr}", "--seed", "{seed}"]
    checkpoint_dir = "/shared/ckpt/cnn-{lr}-{seed}"

    [sweep]
    lr = [0.01, 0.1]
    seed = [1, 2]

``{key}`` in any string of the file (command, args, env, workdir, checkpoint_dir, name) is the
value, written as text; a key whose whole value is ``{key}`` takes the value with its type, so
``batch_size = "{bs}"`` sweeps a number. A name without keys gets them appended. Every key
must be used, a ``{word}`` that is no key is refused (a typo would run every job alike), the
names must differ, and at most ``MAX_JOBS`` jobs come from one file.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heet_tui.config.errors import ConfigError
from heet_tui.config.locate import LineIndex

TABLE = "sweep"
MAX_JOBS = 1000
KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
Scalar = str | int | float | bool


def sweep_points(data: dict[str, Any], path: Path, line_of: Callable[[str], int | None],
                 text: str = "", index: LineIndex | None = None) -> list[dict[str, Scalar]]:
    """Every combination of the sweep's values, in file order (the last key varies fastest).
    A problem with one key is placed on its line in ``text``, a placeholder on the first line
    that writes it (all were placed on the table's header)."""
    table = data[TABLE]
    where = line_of(TABLE)
    index = index or LineIndex(text)

    def at(key: str) -> int | None:
        return index.key_line(TABLE, 0, key) or where

    if not isinstance(table, dict) or not table:
        raise ConfigError(path, f'"{TABLE}" must be a table of lists, e.g. [{TABLE}] then lr = [0.01, 0.1]', where)
    for key, values in table.items():
        if not KEY.match(key):
            raise ConfigError(path, f'sweep key "{key}": use letters, digits and _ (it is written {{{key}}})', at(key))
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, str | int | float) for v in values)):
            raise ConfigError(path, f'sweep key "{key}": expected a non-empty list of strings or numbers', at(key))
        if len({_text(v) for v in values}) != len(values):
            raise ConfigError(path, f'sweep key "{key}": a value is listed twice', at(key))
    used = _placeholders(data)
    unknown = sorted(used - set(table))
    if unknown:
        written = next((n for n, line in enumerate(text.splitlines(), 1) if _placeholder(unknown[0]) in line), where)
        raise ConfigError(path, f'{{{unknown[0]}}} is no sweep key (the [{TABLE}] table has '
                          f'{", ".join(table)})', written)
    unused = [k for k in table if k not in used]
    if unused:
        raise ConfigError(path, f'sweep key "{unused[0]}" appears in no value: write {{{unused[0]}}} where it goes '
                          '(args, env, checkpoint_dir, ...)', at(unused[0]))
    count = 1
    for values in table.values():
        count *= len(values)
    if count > MAX_JOBS:
        raise ConfigError(path, f"the sweep makes {count} jobs; at most {MAX_JOBS} come from one file", where)
    keys = list(table)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*table.values())]


def substituted(data: dict[str, Any], point: dict[str, Scalar]) -> dict[str, Any]:
    """The file's keys (less the sweep table) with ``point``'s values written in."""
    out = {k: _fill(v, point, typed=k != "env") for k, v in data.items() if k != TABLE}
    name = data.get("name")
    if isinstance(name, str) and not any(_placeholder(k) in name for k in point):
        out["name"] = "-".join([name, *(f"{k}{_text(v)}" for k, v in point.items())])
    return out


def _fill(value: Any, point: dict[str, Scalar], typed: bool) -> Any:
    """``typed``: a key's own value (not a list item, not an environment variable, which are
    strings whatever they hold)."""
    if isinstance(value, str):
        for key, v in point.items():
            if typed and value == _placeholder(key):
                return v
            value = value.replace(_placeholder(key), _text(v))
        return value
    if isinstance(value, list):
        return [_fill(v, point, typed=False) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, point, typed) for k, v in value.items()}
    return value


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(PLACEHOLDER.findall(value))
    if isinstance(value, list):
        return set().union(*map(_placeholders, value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for k, v in value.items() if k != TABLE)) if value else set()
    return set()


def _placeholder(key: str) -> str:
    return "{" + key + "}"


def _text(value: Scalar) -> str:
    """How a value is written into a string: floats exactly as typed back (repr), not rounded."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)
