"""Output files named on the command line are checked before any work starts.

A simulation or a bound can take minutes; finding only afterwards that ``--json`` points into
a missing directory threw the result away (and ended in a traceback). Every option that names
a file to write goes through :func:`check_output_path` first, so a typo costs nothing and reads
as the same one-line usage error (exit 2) whichever option carried it.
"""

from __future__ import annotations

import os
from pathlib import Path

from heet_tui.cli.errors import UsageError


def check_output_path(command: str, option: str, path: str | None) -> None:
    """Raise :class:`UsageError` naming ``option`` and ``path`` if a file there could not be written.

    Nothing is created: an output the run never gets to write should not be left behind empty.
    An existing file is fine (it is replaced, as before). ``None`` (option not given) passes.
    """
    if path is None:
        return
    target = Path(path)
    where = f"{command}: {option} {path}"
    if path == "-":
        if option == "--out":  # sim generate: standard output is where it writes without one
            raise UsageError(f"{where}: leave {option} out to write to standard output, or name a file")
        # "/dev/stdout works" was said here, but the table goes there too: json.load of it failed
        raise UsageError(f"{where}: name a file, e.g. {option} out.json (standard output carries the table, "
                         "so it cannot carry this too)")
    if target.is_dir():
        raise UsageError(f"{where}: is a directory (name a file inside it)")
    parent = target.parent
    if not parent.exists():
        raise UsageError(f"{where}: parent directory {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{where}: {parent} is not a directory")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UsageError(f"{where}: file is not writable")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: directory {parent} is not writable")


def check_distinct(command: str, outputs: dict[str, str | None]) -> None:
    """Two options naming one file: the second write silently replaced the first (``--json X
    --events X`` left only the metrics)."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None or path in ("/dev/stdout", "/dev/stderr"):
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UsageError(f"{command}: {seen[key]} and {option} both name {path}: give each its own file")
        seen[key] = option
