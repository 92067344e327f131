"""Errors the simulator raises for bad input, each naming the file and line to fix."""

from __future__ import annotations


class SimInputError(ValueError):
    """A workload, cluster or profile input that cannot be simulated.

    The message starts with ``file:line:`` (or ``file:`` when no line applies) so the CLI can
    print it as is and the user knows exactly what to edit.
    """


class PolicyError(RuntimeError):
    """A policy returned a plan the simulated cluster cannot carry out (a double-booked GPU,
    a host that does not exist). This is a bug in the policy, not in the user's input."""
