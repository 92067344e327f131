"""First contact with a host: show its key fingerprint and ask whether to trust it."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Button, Label, Static

from heet_tui.ui.dialogs.base import Dialog, DialogBox, dialog_foot
from heet_tui.ui.widgets.screen_footer import ScreenFooter

_UNKNOWN_FOR = re.compile(r"unknown host key \S+ for (\S+?);")
_CHANGED_FOR = re.compile(r"HOST KEY CHANGED for (\S+?): it now presents \S+, which differs from (.+?); ")
_VIA_JUMP = re.compile(r"^via jump (\S+?): ")
_FINGERPRINT = re.compile(r"\b(SHA256:[A-Za-z0-9+/=]{16,}|MD5:(?:[0-9a-f]{2}:){15}[0-9a-f]{2})")


def fingerprint_in(message: str) -> str | None:
    """The fingerprint a supervisor put in a host-key-unknown message (the snapshot has no field for it)."""
    match = _FINGERPRINT.search(message)
    return match.group(1) if match else None


def key_question_settled(name: str, fingerprint: str, hosts) -> bool:
    """Whether the host no longer asks about ``fingerprint``: it is gone, asks about another key,
    or got past the key check (ready, or failing later at login or at the agent). A reconnect
    attempt (connecting, unreachable) settles nothing: it closed the question a second after it
    opened, and it was never asked again."""
    host = next((h for h in hosts if h.name == name), None)
    if host is None:
        return True
    if host.state.awaits_trust:
        return fingerprint_in(host.message) != fingerprint
    return host.state.value not in ("connecting", "unreachable")


class HostKeyDialog(Dialog[bool]):
    DEFAULT_CSS = """
    HostKeyDialog DialogBox { width: 80; border: thick $warning; padding: 1 2; }
    HostKeyDialog DialogBox > Label { width: 100%; }  /* wraps: the advice and the detail are longer than a line */
    HostKeyDialog #changed { color: $error; text-style: bold; }
    HostKeyDialog #fingerprint { text-style: bold; color: $warning; margin: 1 0; }
    """
    BINDINGS = [Binding("escape", "answer(False)", "Not now")]

    def __init__(self, host: str, fingerprint: str, detail: str = "") -> None:
        super().__init__()
        self.host, self.fingerprint, self.detail = host, fingerprint, detail

    def compose(self) -> ComposeResult:
        with DialogBox():
            jump = _VIA_JUMP.match(self.detail)
            if "HOST KEY CHANGED" in self.detail:
                # A changed key is what a man-in-the-middle looks like: never word it as routine.
                whose = f"the jump host {jump.group(1)} on the way to {self.host}" if jump else self.host
                yield Label(f"WARNING: the host key of {whose} has CHANGED since it was trusted.", id="changed",
                            markup=False)
            elif jump:  # trusting it lets the host's own key be read next
                yield Label(f"First contact with the jump host {jump.group(1)} on the way to {self.host}: its "
                            "host key is not known yet.", markup=False)
            else:
                yield Label(f"First contact with {self.host}: its host key is not known yet.")
            yield Static(self.fingerprint, id="fingerprint", markup=False)
            yield Label("Compare it with the key on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub).")
            # The rest of the host's message repeats the fingerprint and names the CLI command
            # this dialog stands for; the address (and the file a changed key differs from) is
            # what the user checks.
            if changed := _CHANGED_FOR.search(self.detail):
                yield Label(f"Offered by {changed.group(1)}. The key trusted before is in {changed.group(2)}; "
                            "check with the host's admin: trusting replaces it.", markup=False)
            elif offered_by := _UNKNOWN_FOR.search(self.detail):
                yield Label(f"Offered by {offered_by.group(1)}.", markup=False)
            elif self.detail:
                yield Label(self.detail, markup=False)
            yield dialog_foot(Button("Not now", id="no"), Button("Trust this key", id="yes", variant="warning"))
        yield ScreenFooter()  # its own keys: the screen's footer below named keys that do nothing here

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
