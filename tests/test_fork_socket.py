"""The fork server's socket path: a TMPDIR too deep for AF_UNIX is refused in one line
before any rank starts (multiprocessing reported it as a traceback)."""

from pathlib import Path

import pytest

from archipelago.emulate.reaper import _check_socket_room
from archipelago.errors import ArchipelagoError


def test_the_socket_path_limit_by_hand() -> None:
    # "/listener-" and 8 characters after the directory: a 89-byte directory makes 107
    fits = Path("/" + "a" * 88)
    _check_socket_room(fits)
    with pytest.raises(ArchipelagoError, match=r"^TMPDIR '/' is too long for the emulation's "
                       r"fork server socket \(108 bytes, AF_UNIX takes 107\); set TMPDIR to a "
                       r"directory of at most 75 bytes$"):
        _check_socket_room(Path("/" + "a" * 89))
