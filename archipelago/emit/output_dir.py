"""An output directory that writers cannot leave, that is never overwritten by accident, and
that never holds half a build: files are staged in a hidden directory inside it and moved
into place only once every one of them is written."""

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.output_file import check_name_lengths, check_writable_dir, shown

OPTION = "--out"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_dir(root: Path | str, force: bool) -> Path:
    """The resolved root a build may be written to, checked before any work: its names fit,
    it is a directory (or can be made in one a file can be created in), and it is empty
    unless `force`."""
    if not str(root).strip():  # Path('') is the working directory
        raise ArchipelagoError(f"{OPTION} {str(root)!r} is an empty name; give a directory")
    given = Path(root)
    check_name_lengths(given, OPTION)
    try:
        resolved = given.resolve()
        if resolved.exists() and not resolved.is_dir():
            raise ArchipelagoError(f"{OPTION} {shown(resolved)} exists and is not a directory")
        if resolved.exists() and any(resolved.iterdir()) and not force:
            raise ArchipelagoError(f"{OPTION} {shown(resolved)} is not empty; pass --force to "
                                   "overwrite the files of a previous build")
        existing = _nearest_existing(resolved)
    except RuntimeError:  # pathlib's resolve on a loop of symbolic links
        raise ArchipelagoError(f"{OPTION} {shown(given)}: a loop of symbolic links") from None
    except OSError as err:  # a path through a file, an unreadable parent, a long path
        raise ArchipelagoError(f"{OPTION} {shown(given)}: {err.strerror or err}") from None
    check_writable_dir(existing, OPTION, given)
    return resolved


class OutputDir:
    """Use as `with OutputDir(out, force) as target: target.write_text(...)`. Every path is
    resolved (symlinks included) and must stay under the root. A root that already holds
    files is refused unless `force`; nothing of the user's is ever deleted. If any write
    fails, or the writer raises, the root is left as it was."""

    def __init__(self, root: Path | str, force: bool = False) -> None:
        self.root = check_output_dir(root, force)
        self.written: list[str] = []
        self._staging: Path | None = None
        self._made_root = False

    def __enter__(self) -> "OutputDir":
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self._commit()
        else:
            self._discard()

    def path(self, relative: str) -> Path:
        target = (self.root / relative).resolve()
        if not target.is_relative_to(self.root) or target == self.root:
            raise ArchipelagoError(f"refusing to write {relative!r} outside {shown(self.root)}")
        return target

    def _fail(self, what: str, err: OSError) -> ArchipelagoError:
        self._discard()
        return ArchipelagoError(f"cannot write {what}: {err.strerror or err} (after "
                                f"{len(self.written)} of the build's files; nothing in "
                                f"{shown(self.root)} was changed)")

    def write_text(self, relative: str, text: str) -> None:
        """Staged now; moved into place when the `with` block ends without an error."""
        self._stage(relative, lambda staged: staged.write_text(text))

    def write_bytes(self, relative: str, data: bytes) -> None:
        """A binary file (a program image), staged like `write_text`'s."""
        self._stage(relative, lambda staged: staged.write_bytes(data))

    def write_tree(self, relative: str, fill: Callable[[Path], object]) -> None:
        """A folder another tool writes itself (an hls4ml project): `fill(folder)` writes
        into a staged, empty folder; every file it leaves there is moved into place with
        the build's other files."""
        target = self.path(relative)
        try:
            staged = self._staged(target)
            staged.mkdir()
        except OSError as err:
            raise self._fail(shown(target), err) from None
        fill(staged)
        files = sorted(p for p in staged.rglob("*") if p.is_file() or p.is_symlink())
        outside = [p for p in files if p.is_symlink()]
        if outside:
            self._discard()
            raise ArchipelagoError(f"refusing the link {outside[0].name} that {relative} "
                                   "holds: a build's files are plain files")
        self.written += [str(Path(relative) / p.relative_to(staged)) for p in files]

    def _staged(self, target: Path) -> Path:
        """Where `target` is staged (its folder made)."""
        if self._staging is None:
            self._made_root = not self.root.exists()
            self.root.mkdir(parents=True, exist_ok=True)
            self._staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".staging-"))
        staged = self._staging / target.relative_to(self.root)
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    def _stage(self, relative: str, write: Callable[[Path], object]) -> None:
        target = self.path(relative)
        try:
            write(self._staged(target))
        except OSError as err:
            raise self._fail(shown(target), err) from None
        self.written.append(relative)

    def write_json(self, relative: str, data: Any, compact: bool = False) -> None:
        """Indented for reading; `compact` for files with one entry per kernel, which
        json only writes fast without indentation."""
        text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=1)
        self.write_text(relative, text + "\n")

    def _conflict(self, target: Path) -> str | None:
        """Why `target` cannot take a file: a directory in its place, or a file where one
        of its folders goes."""
        if target.is_dir():
            return f"{target} is a directory"
        for folder in target.relative_to(self.root).parents:
            place = self.root / folder
            if place.exists() and not place.is_dir():
                return f"{place} is a file where the build needs a directory"
        return None

    def _commit(self) -> None:
        if self._staging is None:
            return
        targets = [self.path(r) for r in self.written]
        problem = next((p for p in map(self._conflict, targets) if p), None)
        if problem:
            self._discard()
            raise ArchipelagoError(f"cannot write the build into {self.root}: {problem}; "
                                   "nothing was changed")
        moved = 0
        try:
            for target in targets:  # renames within one file system: no space needed
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self._staging / target.relative_to(self.root), target)
                moved += 1
        except OSError as err:
            self._made_root = False  # it holds the files already moved
            self._discard()
            raise ArchipelagoError(f"cannot move {target} into place: "
                                   f"{err.strerror or err} ({moved} of {len(targets)} "
                                   "files moved)") from None
        self._made_root = False
        self._discard()

    def _discard(self) -> None:
        """Remove the staging directory, and the root too when this build created it."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if self._made_root:
            with contextlib.suppress(OSError):
                self.root.rmdir()
