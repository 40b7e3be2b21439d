"""The error a ``haystack-mvr`` subcommand raises for an everyday mistake (imports nothing, so any module may)."""


class CommandError(Exception):
    """An everyday mistake (a missing file, a bad option) the CLI reports as one line, without a traceback."""
