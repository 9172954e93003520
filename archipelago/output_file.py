"""A result file written so that nothing a user made is lost and no half-written file is left:
checked before the work that produces it starts, kept unless forced, replaced atomically."""

import errno
import os
import stat
import tempfile
from pathlib import Path

from archipelago.errors import ArchipelagoError, elide, elide_path
from archipelago.safe_read import file_kind

NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, xfs, tmpfs)
TEMP_PREFIX = ".archipelago-"  # temporary files beside a target being written


def shown(path: Path) -> str:
    """A path as an error line repeats it: elided in its directories when long (a 4,000-
    character --out made a 4,000-character line), the file name kept."""
    return elide_path(str(path))


def output_path(text: str) -> Path:
    """An output option's file or directory name (a command-line option's parser), refused
    when empty or blank: Path('') is the working directory, so `build --out '' --force`
    wrote its files there and `proxies --out ''` was refused as "--out . is a directory"."""
    if not text.strip():
        from typer import BadParameter  # the parser's own "Invalid value for '--out'" line

        raise BadParameter(f"{text!r} is an empty name; give a file or directory name")
    return Path(text)


def check_name_lengths(path: Path, option: str) -> None:
    """Every component of `path` fits a file system's name limit."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise ArchipelagoError(f"{option}: the name '{elide(part, 60)}' is "
                                   f"{len(os.fsencode(part))} bytes; the limit is {NAME_MAX}")


def check_writable_dir(directory: Path, option: str, path: Path) -> None:
    """`directory` exists and a file can be created in it, found by creating (and removing)
    one: permission bits say nothing for root, and /proc or a read-only mount only
    refuse at creation."""
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
        raise ArchipelagoError(f"{option} {shown(path)}: {shown(directory)} {problem}")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".archipelago-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ArchipelagoError(f"{option} {shown(path)}: cannot write in directory "
                               f"{shown(directory)} ({err.strerror or err})") from None


def _existing_target(path: Path, option: str) -> bool:
    """Whether something is at `path`; refuses what a file must never replace, --force or
    not: a directory, a FIFO, a device, a socket, a symbolic link that leads nowhere."""
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # a parent that is a file: see the dir
        return False
    except OSError as err:  # a loop of links above it, a name too long, ...
        raise ArchipelagoError(f"{option} {shown(path)}: {err.strerror or err}") from None
    try:
        mode = path.stat().st_mode
    except OSError as err:
        if isinstance(err, FileNotFoundError) or err.errno == errno.ELOOP:
            raise ArchipelagoError(f"{option} {shown(path)} is a symbolic link that leads nowhere "
                                   "(dangling or a loop); remove it or give another name"
                                   ) from None
        raise ArchipelagoError(f"{option} {shown(path)}: {err.strerror or err}") from None
    if stat.S_ISDIR(mode):
        raise ArchipelagoError(f"{option} {shown(path)} is a directory; give a file name")
    if not stat.S_ISREG(mode):
        raise ArchipelagoError(f"{option} {shown(path)} is {file_kind(mode)}, not a regular file; "
                               "give another file name")
    return True


def check_output_file(path: Path, option: str, force: bool | None,
                      suffixes: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, a target that cannot or must not be written (`force`
    None: the option never replaces a file)."""
    if suffixes and path.suffix.lower() not in suffixes:
        raise ArchipelagoError(f"{option} {shown(path)}: the file name must end in "
                               f"{' or '.join(suffixes)}")
    check_name_lengths(path, option)
    if _existing_target(path, option) and not force:
        hint = "choose a new name" if force is None else "pass --force to replace it"
        raise ArchipelagoError(f"{option} {shown(path)} exists; {hint}")
    check_writable_dir(path.parent, option, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str, option: str, force: bool) -> None:
    """Write a temporary file beside `path`, then move it into place in one step: readers
    see the old file or the new one, never a partial one. Without `force`, a file that
    appeared meanwhile is kept (the hard link that publishes the new one fails)."""
    if force:  # something that is not a file may have appeared since the check
        _existing_target(path, option)
    # A short name of its own: `path`'s name may already be at the file system's limit.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=".tmp")
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
        raise ArchipelagoError(f"{option} {shown(path)} appeared while working; kept it, pass "
                               "--force to replace it") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
