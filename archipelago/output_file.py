"""A result file written so that nothing a user made is lost and no half-written file is left:
checked before the work that produces it starts, kept unless forced, replaced atomically."""

import os
import tempfile
from pathlib import Path

from archipelago.errors import ArchipelagoError


def check_output_file(path: Path, option: str, force: bool) -> None:
    """Refuse, before any work, a target that cannot or must not be written."""
    if path.is_dir():
        raise ArchipelagoError(f"{option} {path} is a directory; give a file name")
    if path.exists() and not force:
        raise ArchipelagoError(f"{option} {path} exists; pass --force to replace it")
    parent = path.parent
    if not parent.is_dir():
        raise ArchipelagoError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArchipelagoError(f"{option} {path}: directory {parent} is not writable")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str, option: str, force: bool) -> None:
    """Write a temporary file beside `path`, then move it into place in one step: readers
    see the old file or the new one, never a partial one. Without `force`, a file that
    appeared meanwhile is kept (the hard link that publishes the new one fails)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        if force:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:
        raise ArchipelagoError(f"{option} {path} appeared while working; kept it, pass "
                               "--force to replace it") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
