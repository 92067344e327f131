"""The architecture's rules (docs/ARCHITECTURE.md), checked on the code: a review found three
imports against the one-way flow and nothing that would have caught them."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# package -> the heet_tui packages it may import (docs/ARCHITECTURE.md's table); cli and bench: all
MAY_IMPORT = {
    "core": {"core"},
    "config": {"core", "config"},
    "profiling": {"core", "profiling"},
    "scheduling": {"core", "scheduling"},
    "sim": {"core", "config", "profiling", "scheduling", "sim"},
    "cluster": {"core", "config", "cluster"},
    "control": {"core", "config", "profiling", "scheduling", "sim", "cluster", "control"},
    "ui": {"core", "config", "control", "ui"},
}
MAX_LINES = 400  # one module, one job


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # function-level imports too
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "heet_tui":  # from heet_tui import control
            names += [f"heet_tui.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # relative: the project writes none
            names.append(f"<relative import in {path.name}>")
    return names


def test_each_package_imports_only_what_the_architecture_allows() -> None:
    wrong = []
    for path in sorted((REPO / "heet_tui").rglob("*.py")):
        package = path.relative_to(REPO / "heet_tui").parts[0]
        for name in _imports(path):
            if name.split(".")[0] == "textual" and package != "ui":
                wrong.append(f"{path.relative_to(REPO)}: {name} (only ui imports textual)")
            if name.startswith("heet_tui.") and package in MAY_IMPORT and name.split(".")[1] not in MAY_IMPORT[package]:
                wrong.append(f"{path.relative_to(REPO)}: {name}")
            if name.startswith("<relative"):
                wrong.append(f"{path.relative_to(REPO)}: {name} (absolute imports, so the rules above can see them)")
    assert not wrong, "\n".join(wrong)


def test_the_agent_imports_only_the_standard_library_and_itself_at_module_level() -> None:
    """nvidia-ml-py and torch are optional there: imported inside functions, where a host without
    them does not reach."""
    import sys

    wrong = []
    for path in sorted((REPO / "remote").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "heet_agent":
                    wrong.append(f"{path.relative_to(REPO)}: {name}")
    assert not wrong, "\n".join(wrong)


def test_no_module_is_over_the_line_limit() -> None:
    long = [f"{p.relative_to(REPO)}: {n}" for p in sorted([*(REPO / "heet_tui").rglob("*.py"), *(REPO / "remote").glob("*.py")])
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, "split these: " + ", ".join(long)
