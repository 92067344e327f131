"""Package layout only; metadata lives in pyproject.toml.

The agent sources sit in ``remote/`` and the bundled configs in ``configs/`` (where a reader of
the repository looks for them) yet must be importable resources of the installed wheel, so
they are mapped to ``heet_agent`` and ``heet_tui.bundled_configs``.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["heet_tui", "heet_tui.*"], exclude=["heet_tui.bundled_configs*", "*.__pycache__"]),
        "heet_agent",
        "heet_tui.bundled_configs",
        "heet_tui.bundled_configs.sim",
    ],
    package_dir={
        "heet_agent": "remote",
        "heet_tui.bundled_configs": "configs",
        "heet_tui.bundled_configs.sim": "configs/sim",
    },
)
