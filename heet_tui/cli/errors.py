"""Errors a subcommand raises to end with a message instead of a traceback."""


class CliError(Exception):
    """Exit code 1: the command was well-formed but failed (a host down, a solver error)."""


class UsageError(CliError):
    """Exit code 2: bad usage or bad input (a TOML error, an unknown host name)."""
