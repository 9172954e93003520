"""A result file written so that nothing a user made is lost and no half-written file is left:
checked before the work that produces it starts, kept unless forced, replaced atomically."""

import os
import tempfile
from pathlib import Path

from archipelago.errors import ArchipelagoError

NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, xfs, tmpfs)


def check_name_lengths(path: Path, option: str) -> None:
    """Every component of `path` fits a file system's name limit."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise ArchipelagoError(f"{option}: the name '{part[:40]}...' is "
                                   f"{len(os.fsencode(part))} bytes; the limit is {NAME_MAX}")


def check_writable_dir(directory: Path, option: str, path: Path) -> None:
    """`directory` exists and a file can be created in it, found by creating (and removing)
    one: permission bits say nothing for root, and /proc or a read-only mount only
    refuse at creation."""
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
        raise ArchipelagoError(f"{option} {path}: {directory} {problem}")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".archipelago-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ArchipelagoError(f"{option} {path}: cannot write in directory {directory} "
                               f"({err.strerror or err})") from None


def check_output_file(path: Path, option: str, force: bool | None,
                      suffixes: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, a target that cannot or must not be written (`force`
    None: the option never replaces a file)."""
    if suffixes and path.suffix.lower() not in suffixes:
        raise ArchipelagoError(f"{option} {path}: the file name must end in "
                               f"{' or '.join(suffixes)}")
    check_name_lengths(path, option)
    try:
        if path.is_dir():
            raise ArchipelagoError(f"{option} {path} is a directory; give a file name")
        if os.path.lexists(path) and not path.exists():
            raise ArchipelagoError(f"{option} {path} is a symbolic link that leads nowhere "
                                   "(dangling or a loop); remove it or give another name")
        if path.exists() and not force:
            hint = "choose a new name" if force is None else "pass --force to replace it"
            raise ArchipelagoError(f"{option} {path} exists; {hint}")
    except OSError as err:  # a parent that is a file, a loop of links, ...
        raise ArchipelagoError(f"{option} {path}: {err.strerror or err}") from None
    check_writable_dir(path.parent, option, path)


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
