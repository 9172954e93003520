"""Blocking waits on a 32-bit word in memory shared between processes (Linux futex(2)).

A rank that waits for a peer's counter sleeps in the kernel instead of spinning: four ranks
on two cores would otherwise steal the CPU from the very peers they wait for. futex(2)
checks the word inside the kernel before sleeping, so a wake that comes between the
caller's read and its sleep is never lost; every return may still be spurious (the caller
re-reads the word).
"""

import ctypes
import platform
import sys
from functools import cache

# x86-64's syscall number (Linux arch/x86/entry/syscalls/syscall_64.tbl, "202 common futex")
_SYS_FUTEX = 202
# FUTEX_WAIT and FUTEX_WAKE, not their _PRIVATE forms: the word is shared between processes
_WAIT, _WAKE = 0, 1
_EVERYONE = 2**31 - 1


def supported() -> bool:
    """Linux on x86-64: the syscall number above, and the memory order the shared-memory
    collectives rely on (x86's total store order: a peer that sees a counter also sees
    the data stored before it; other CPUs would need fences Python cannot issue)."""
    return sys.platform.startswith("linux") and platform.machine() == "x86_64"


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


@cache
def _syscall() -> ctypes._CFuncPtr:
    call = ctypes.CDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    return call


def wait(address: int, seen: int, timeout_s: float) -> None:
    """Sleep while the int32 at `address` still holds `seen`, until a wake or `timeout_s`
    (a signal, or the word changing first, returns at once)."""
    whole = int(timeout_s)
    span = _Timespec(whole, int((timeout_s - whole) * 1e9))
    _syscall()(_SYS_FUTEX, ctypes.c_void_p(address), _WAIT, ctypes.c_int(seen),
               ctypes.byref(span), None, 0)


def wake(address: int) -> None:
    """Wake every process sleeping on the int32 at `address`."""
    _syscall()(_SYS_FUTEX, ctypes.c_void_p(address), _WAKE, _EVERYONE, None, None, 0)
