"""`?`: what every key does on every screen, and what the colours mean."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Markdown

from heet_tui.ui.dialogs.base import Dialog, DialogBox

HELP = """\
# heet-tui keys

`escape`, `q` or `?` closes this help; arrows, `pgup` and `pgdn` scroll it.

| key | where | does |
|---|---|---|
| `1`..`5` | everywhere | Cluster, Jobs, Plan, Profiles, Hosts |
| `ctrl+p` | everywhere | command palette: submit job, connect host, drain or undrain host, switch policy |
| `?` | everywhere | this help |
| `q` | everywhere | quit (asks first while other TUIs or log -f watch the controller this TUI runs) |
| `g` | Cluster | group hosts by GPU type or by rack |
| `d` / `c` / `k` | Cluster | drain (asked first where jobs run, which then move off) or undrain, reconnect, trust a new host key |
| `n` | Jobs | submit a job: a job.toml, a directory of them or a glob (a sweep) |
| `s` | Jobs | next sort order (cursor stays on its job) |
| `/` | Jobs, Cluster | filter by words (jobs: id, name, model, state, type, hosts; hosts: name, type, rack, state, jobs); `escape` clears |
| `x` | Jobs | cancel the selected job (asks first) |
| `r` | Jobs | retry the selected failed or cancelled job (or one done short of its target), from its checkpoint |
| `u` | Jobs | give the selected job its changed spec file (heet-tui update): id, progress and checkpoint kept |
| `l` | Jobs | the selected job's output: the last lines rank 0 of its latest run wrote, followed as it writes (`f` pauses; scrolled up, it holds still until you are back at the end); `r` reads them again |
| `d` | Jobs | drop what you fixed for the selected job with `e` on the Plan screen: plans place it freely again |
| `a` / `r` | Plan | approve / reject the plan on screen; one that replaced another in the last 2 s is left as it is, and said so: press again once read |
| `p` | Plan | plan again now, plans you rejected included |
| `e` | Plan | tweak the selected job: type, count, hosts, pin, hold, with a live prediction; every later plan keeps to it until `d` on Jobs drops it, and rejecting the plan takes it back |
| `t` | Plan | auto-approve on/off |
| `n` / `e` or `enter` / `x` or `delete` | Hosts | add, edit, remove a host (saved at once, comments kept) |
| `o` | Hosts | open the hosts file in `$EDITOR`; re-validated afterwards |
| `ctrl+r` | Hosts | read the hosts file again now (a running controller also does by itself, every round) |
| `enter` / `ctrl+s` | forms | next field / save (or apply); `pgup` `pgdn` scroll a dialog taller than the terminal |

Footer keys show only what can be done now; with `--read-only` nothing that changes anything is offered.
On a narrow terminal a few keys give way in the footer so that the rest fit (sort, filter, group, replan,
auto, reload, `$EDITOR`): they still work as this table says.

**Colours.** Each job has one colour on every screen; GPU cells are coloured and shaped by their job (`■`, `▲`,
`◆`...: jobs on one host never share a shape, so they are told apart without colour), `▢` is free,
`✕` a drained host's free GPU, `▨` a GPU that processes heet did not start compute on (plans keep off
it; the host's details name them). A host shown *stale* has not been heard from: its figures are the last known.
On the Profiles screen the columns are placements, one digit per host (`4`: 4 GPUs on one host, `22`: 2
on each of two hosts); `●` marks a measured throughput and `~` a predicted one with its uncertainty
(`±?`: a rough guess no model backs yet); on the Plan screen a new speed with `±` is predicted (one
without it was measured), and `✎`
after a job says you fixed its placement with `e` (the Jobs screen shows what, and `d` there drops it).
On the Plan screen *Done in* is the predicted time from now to the job's end under the plan (restart pause
included), *Pause* the seconds it trains nothing while it checkpoints and relaunches, and the average JCT
counts each job from its submission, so it grows with the time jobs have already waited.
Jobs with the same `model` and `batch_size` (a sweep) are profiled once and share their measurements.

**When something goes wrong.** A job's own output is `l` on the Jobs screen; what the controller
did and why is in `controller.log` in the state directory (an error inside the controller shows here
once, as a notice, with its traceback there), `heet-tui jobs NAME` shows a job's history and events, and
`heet-tui log NAME` its output. A host where jobs die at once while they run elsewhere is drained as broken.
A job whose State reads *host out* runs on a host the controller cannot reach: it keeps its GPUs for a
grace period in case the host comes back (its details say until when), then starts elsewhere.
If the controller stops, the header says so until it runs again: the figures are those it last sent (hosts
turn stale as time passes) and nothing can be changed; a TUI attached to `heet-tui run` attaches again by itself.
"""


class HelpDialog(Dialog[None]):
    DEFAULT_CSS = "HelpDialog DialogBox { width: 100; height: 85%; padding: 0; }"
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with DialogBox(can_focus=True):  # nothing else takes the keys that scroll it
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
