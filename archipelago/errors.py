"""One exception family, so the CLI can print any user mistake on one line and exit 2."""

from collections.abc import Iterable


class ArchipelagoError(Exception):
    """Base of every error caused by user input; its message is meant to be shown as is."""


class UnknownNameError(ArchipelagoError):
    """A model, device, strategy or other registry name that does not exist."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        super().__init__(f"unknown {kind} '{name}'; valid choices: {', '.join(self.choices)}")


class ConfigError(ArchipelagoError):
    """A malformed input file; names the file and the offending field."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source, self.field = source, field
        super().__init__(f"{source}: field '{field}': {problem}")


class PartitionError(ArchipelagoError):
    """A split that the chosen strategy cannot make on the chosen cluster."""
