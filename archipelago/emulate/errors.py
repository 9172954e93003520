"""Emulation errors: both print as one line through the CLI (exit status 2)."""

from archipelago.errors import ArchipelagoError, elide


class EmulationError(ArchipelagoError):
    """A model, setting or checkpoint the emulator cannot run; raised before any rank starts."""


class RankFailure(ArchipelagoError):
    """A rank raised, died or hung; the message names the rank and the reason."""


def one_line(err: BaseException) -> str:
    """An exception as one line: its type and the first non-empty line of its message
    (torch's errors run on with hints and C++ frames), elided to a terminal line."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return elide(f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__)
