"""An output directory that writers cannot leave, and that is never overwritten by accident."""

import json
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
        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        self.written.append(relative)

    def write_json(self, relative: str, data: Any, compact: bool = False) -> None:
        """Indented for reading; `compact` for files with one entry per kernel, which
        json only writes fast without indentation."""
        text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=1)
        self.write_text(relative, text + "\n")
