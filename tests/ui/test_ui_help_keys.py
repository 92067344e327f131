"""The help lists every key a screen binds: ctrl+r (read the hosts file again) was missing."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.binding import Binding

import heet_tui.ui.screens as screens
from heet_tui.ui.dialogs.help import HELP

TEXTUAL_OWN = {"tab", "shift+tab", "ctrl+c", "super+c", "escape"}  # focus and copy: Textual's, not heet's
SHOWN_AS = {"slash": "/", "question_mark": "?"}


def test_the_help_names_every_key_the_screens_bind() -> None:
    missing = []
    for info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            for binding in getattr(cls, "BINDINGS", []) if cls.__module__ == module.__name__ else []:
                keys = binding.key.split(",") if isinstance(binding, Binding) else []
                missing += [f"{name}: {key}" for key in keys
                            if key not in TEXTUAL_OWN and f"`{SHOWN_AS.get(key, key)}`" not in HELP]
    assert not missing, missing
