"""The error a command function raises for options given wrong or missing: tools/ and generator/ raise it, the CLI
shows it (cli_support.py) as a usage error naming the option."""

from __future__ import annotations


class UsageError(ValueError):
    """A command given wrong or missing options; ``option`` names the one at fault when one is."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option
