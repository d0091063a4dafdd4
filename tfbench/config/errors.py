"""Errors that tfbench reports as one line instead of a traceback."""


class ConfigError(ValueError):
    """A bad flag value or combination; reported before anything is spawned (exit code 2)."""
