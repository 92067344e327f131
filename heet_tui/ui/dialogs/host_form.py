"""Add or edit one host of the hosts file, with the file's own validation shown inline.

The form only turns text into values (``"0,1"`` -> ``[0, 1]``); whether the host is valid is
decided by the hosts-file checks through ``apply``, so the form and ``heet-tui`` can never
disagree about what a valid host is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from heet_tui.ui.dialogs.base import DialogBody, DialogBox, FormDialog, dialog_foot
from heet_tui.ui.widgets.marked_checkbox import MarkedCheckbox
from heet_tui.ui.widgets.screen_footer import ScreenFooter

# (key, label, placeholder), in the order shown and tabbed through
TEXT_FIELDS = (
    ("name", "Name", "required: ASCII letters, digits, . _ -"),
    ("address", "Address", "default: the name (or an ~/.ssh/config alias)"),
    ("port", "Port", "ssh config, else 22"),
    ("user", "User", "ssh config, else yours"),
    # what a host behind a login node or with its own interpreter needs: such a host could only be
    # written by hand, and the form showed no sign of these keys
    ("jump", "Jump", "[user@]host[:port] (default: [defaults]); none: connect directly"),
    ("gpu_type", "GPU type", "override what NVML reports"),
    ("gpus", "GPUs", "indices heet may use, e.g. 0,1,2 (default all)"),
    ("tags", "Tags", "comma-separated"),
    ("rack", "Rack", "network locality"),
    ("emulate", "Emulate", "TYPE:COUNT:SPEED, e.g. T4:4:0.25 (real training on CPU)"),
    ("python", "Python", "default: [defaults], python3"),
    ("workdir", "Workdir", "default: [defaults], ~/.heet"),
)
# fields that share a row (the second labelled narrower): all of the form fits 70x20 at once
PAIRED = {"port": "user", "tags": "rack", "python": "workdir"}
NO_JUMP = "none"  # written as jump = "": a host that opts out of [defaults]' jump host
SHARED_FS = "shared_fs"
SHORT_SCREEN = 34  # lines: below this the form's rows lose their gaps, and the whole form fits in 20


def fields_from_form(values: Mapping[str, str], transport: str, shared_fs: bool | None) -> dict[str, Any]:
    """Typed fields for the hosts editor; empty text means "not set" (``shared_fs`` None too: the
    default's). Raises ``ValueError`` on bad text."""
    out: dict[str, Any] = {}
    for key, raw in values.items():
        text = raw.strip()
        if not text:
            out[key] = None
        elif key == "port":
            out[key] = _int(text, "port")
        elif key == "gpus":
            out[key] = [_int(part, "GPU index") for part in text.split(",") if part.strip()]
        elif key == "tags":
            out[key] = [part.strip() for part in text.split(",") if part.strip()]
        elif key == "jump" and text.lower() == NO_JUMP:
            out[key] = ""
        elif key == "emulate":
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError("emulate: write TYPE:COUNT:SPEED, e.g. T4:4:0.25")
            try:
                speed = float(parts[2])
            except ValueError:
                raise ValueError(f'emulate: speed "{parts[2]}" is not a number') from None
            out[key] = {"gpu_type": parts[0].strip(), "count": _int(parts[1], "emulate count"), "speed": speed}
        else:
            out[key] = text
    out["transport"] = None if transport == "ssh" else transport
    out[SHARED_FS] = shared_fs
    return out


def form_from_fields(raw: Mapping[str, Any]) -> dict[str, str]:
    """The inverse of ``fields_from_form`` for a host's raw table (not merged with defaults)."""
    out = {}
    for key, _, _ in TEXT_FIELDS:
        value = raw.get(key)
        if value is None:
            out[key] = ""
        elif key == "jump" and value == "":
            out[key] = NO_JUMP
        elif key in ("gpus", "tags"):
            out[key] = ",".join(str(v) for v in value)
        elif key == "emulate" and isinstance(value, Mapping):
            out[key] = f"{value.get('gpu_type', '')}:{value.get('count', '')}:{value.get('speed', 1.0)}"
        else:
            out[key] = str(value)
    return out


def field_named(problem: str) -> str | None:
    """The form field a refusal is about: the form's own ("port: ...", "GPU index: ..."), the
    hosts file's checks ('key "port": ...'), and the screen's questions. An emulate's own keys
    ('emulate: key "speed"') are the Emulate field's: its GPU type went to the GPU type field,
    and its speed or count to none."""
    aliases = {"GPU index": "gpus", "emulate count": "emulate"}
    if re.search(r"(^|: )emulate[: ]", problem):
        return "emulate"
    if "duplicate host name" in problem or "renamed, it is a new host" in problem:
        return "name"
    if "choose ssh to reach it" in problem:
        return "transport"
    if (changed := re.match(r"changed in the file since this form opened: (\w+)", problem)) is not None:
        return changed.group(1)
    for key, _, _ in TEXT_FIELDS:
        if problem.startswith(f"{key}:") or f'key "{key}"' in problem:
            return key
    return next((key for said, key in aliases.items() if problem.startswith(f"{said}:")), None)


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f'{what}: "{text.strip()}" is not a whole number') from None


class HostFormDialog(FormDialog[str | None]):
    """Dismisses with the saved host's name; ``apply(fields)`` returns an error message or ``None``."""

    DEFAULT_CSS = """
    HostFormDialog .row { height: auto; margin-bottom: 1; }
    HostFormDialog.-short .row { margin-bottom: 0; }
    HostFormDialog .field { width: 12; }
    HostFormDialog .field.second { width: 9; padding-left: 1; }
    HostFormDialog Input, HostFormDialog Select { width: 1fr; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "save", "Save")]

    def __init__(self, title: str, apply: Callable[[dict[str, Any]], str | None],
                 initial: Mapping[str, Any] | None = None, transport: str = "ssh", shared_default: bool = True,
                 inherited: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.title_text, self.apply = title, apply
        self.initial = dict(initial or {})
        self.transport = transport  # a new host's, where the file's hosts are all local (the bundled config)
        # [defaults]' shared_fs: a host without its own showed ticked under "shared_fs = false" there,
        # and ticking it could not write true
        self.shared_default = shared_default
        # what an empty field means here, from [defaults] ("login.example.org"), in its placeholder:
        # an empty Jump read as a direct connection while the default jump host was used
        self.inherited = dict(inherited or {})

    def compose(self) -> ComposeResult:
        values = form_from_fields(self.initial)
        with DialogBox():
            yield Label(self.title_text, classes="dialog-title")
            with DialogBody():
                # the value first: "[defaults]: " ate the half row, and a python path never showed
                labels = {key: (label, f"{self.inherited[key]} (from [defaults])" + (f"; {NO_JUMP}: connect directly"
                                                                                   if key == "jump" else "")
                                if self.inherited.get(key) else placeholder) for key, label, placeholder in TEXT_FIELDS}
                labels["python"] = ("Python", self._python_hint(str(self.initial.get("transport", self.transport))))
                seconds = set(PAIRED.values())
                for key, (label, placeholder) in labels.items():
                    if key in seconds:
                        continue
                    with Horizontal(classes="row"):
                        yield Label(label, classes="field")
                        yield Input(values[key], placeholder=placeholder, id=f"f-{key}", compact=True)
                        if (other := PAIRED.get(key)) is not None:
                            yield Label(labels[other][0], classes="field second")
                            yield Input(values[other], placeholder=labels[other][1], id=f"f-{other}", compact=True)
                with Horizontal(classes="row"):
                    yield Label("Transport", classes="field")
                    yield Select([("ssh", "ssh"), ("local (this machine)", "local")], allow_blank=False,
                                 value=str(self.initial.get("transport", self.transport)), id="f-transport", compact=True)
                yield MarkedCheckbox("sees the shared checkpoint filesystem",
                                     value=bool(self.initial.get(SHARED_FS, self.shared_default)),
                                     id="f-shared_fs", compact=True)
            # docked: the error line and the buttons stay in view however far the fields scroll
            yield dialog_foot(Button("Cancel", id="cancel"), Button("Save", id="save", variant="primary"),
                              hint=self.HINT, error_id="form-error")
        yield ScreenFooter()  # its own keys: the screen's below read "a Approve" under the form

    def _python_hint(self, transport: str) -> str:
        """What an empty Python field runs: a local host runs heet-tui's own interpreter (it has
        torch), not the python3 the placeholder named for every host."""
        if self.inherited.get("python"):
            return f"{self.inherited['python']} (from [defaults])"
        return "default: heet-tui's own interpreter" if transport == "local" else "default: python3 on the host"

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "f-transport":
            self.query_one("#f-python", Input).placeholder = self._python_hint(str(event.value))

    def on_resize(self, event: events.Resize) -> None:
        """Rows without gaps on a short terminal: at 80x24 Emulate, Transport and the shared-FS box,
        what a local emulated host needs, sat below the fold with no scrollbar to say so."""
        self.set_class(event.size.height < SHORT_SCREEN, "-short")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_cancel()

    def action_save(self) -> None:
        values = {key: self.query_one(f"#f-{key}", Input).value for key, _, _ in TEXT_FIELDS}
        transport = str(self.query_one("#f-transport", Select).value)
        shared = self.query_one("#f-shared_fs", Checkbox).value
        try:
            fields = fields_from_form(values, transport, self._shared(shared))
        except ValueError as exc:
            self._refused(str(exc))
            return
        problem = self.apply(self._changed(fields) if self.initial else fields)
        if problem:
            self._refused(problem)
            return
        self.dismiss(fields.get("name"))

    def _changed(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Only what the user changed in the form: every field was written back, so a hand edit of
        the same host made while the form was open (another key) was silently undone."""
        before = fields_from_form(form_from_fields(self.initial), str(self.initial.get("transport", "ssh")),
                                  self._shared(bool(self.initial.get(SHARED_FS, self.shared_default))))
        changed = {k: v for k, v in fields.items() if k not in before or before[k] != v}
        if isinstance(old := before.get("emulate"), dict) and isinstance(new := changed.get("emulate"), dict):
            changed["emulate"] = {k: v for k, v in new.items() if old.get(k) != v}  # a hand-set speed stays
        return changed

    def _refused(self, problem: str) -> None:
        """Say what is wrong, and go to the field it names: focus stayed where it was, and the
        user tabbed back through ten fields to mend a port typed as "Q"."""
        self.query_one("#form-error", Static).update(problem)
        key = field_named(problem)
        if key is not None:
            self.query_one(f"#f-{key}").focus()

    def _shared(self, ticked: bool) -> bool | None:
        """None (the default's, no key written) where the box agrees with [defaults], else the value."""
        return None if ticked == self.shared_default else ticked

    def action_cancel(self) -> None:
        self.dismiss(None)
