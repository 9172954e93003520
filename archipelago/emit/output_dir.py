"""An output directory that writers cannot leave, and that is never overwritten by accident."""

import json
import os
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError


class OutputDir:
    """Every path is resolved (symlinks included) and must stay under the root. A root
    that already holds files is refused unless `force`; nothing is ever deleted."""

    def __init__(self, root: Path | str, force: bool = False) -> None:
        self.root = Path(root).resolve()
        if self.root.exists() and not self.root.is_dir():
            raise ArchipelagoError(f"--out {self.root} exists and is not a directory")
        if self.root.exists() and any(self.root.iterdir()) and not force:
            raise ArchipelagoError(f"--out {self.root} is not empty; pass --force to "
                                   "overwrite the files of a previous build")
        self.root.mkdir(parents=True, exist_ok=True)
        self.written: list[str] = []

    def path(self, relative: str) -> Path:
        target = (self.root / relative).resolve()
        if not target.is_relative_to(self.root):
            raise ArchipelagoError(f"refusing to write {relative!r} outside {self.root}")
        return target

    def write_text(self, relative: str, text: str) -> None:
        """Written beside the target, then renamed over it: a full disk or a kill midway
        leaves the previous file (a finished build's) whole, never a truncated one."""
        target = self.path(relative)
        partial = target.with_name(f".{target.name}.partial")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(text)
            os.replace(partial, target)
        except OSError as err:
            partial.unlink(missing_ok=True)
            raise ArchipelagoError(f"cannot write {target}: {err.strerror or err} (after "
                                   f"{len(self.written)} of the build's files; files already "
                                   "there are left whole)") from None
        self.written.append(relative)

    def write_json(self, relative: str, data: Any, compact: bool = False) -> None:
        """Indented for reading; `compact` for files with one entry per kernel, which
        json only writes fast without indentation."""
        text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=1)
        self.write_text(relative, text + "\n")
