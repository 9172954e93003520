"""Emulation errors: both print as one line through the CLI (exit status 2)."""

from archipelago.errors import ArchipelagoError


class EmulationError(ArchipelagoError):
    """A model, setting or checkpoint the emulator cannot run; raised before any rank starts."""


class RankFailure(ArchipelagoError):
    """A rank raised, died or hung; the message names the rank and the reason."""
