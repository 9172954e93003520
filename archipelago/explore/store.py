"""Where studies live: `--storage` is a directory holding one journal file per study
(archipelago.batch.journal: a header with the study's identity, then one line per finished
trial keyed by its engine, appended a batch at a time under a lock). Checked before any
work; the directory itself is made when missing, never its parents."""

import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from archipelago.batch.journal import Journal
from archipelago.errors import ArchipelagoError, elide_path
from archipelago.explore.study import StudyIdentity, digest
from archipelago.safe_read import is_dir, probe

KIND = "explore"  # the journal header's kind: what `archi explore` writes
SUFFIX = ".journal"
NAME_MAX = 200  # bytes of a study file's name; most file systems allow 255


def check_storage(text: str, option: str = "--storage") -> Path:
    """The directory `text` names, if studies can live there: printable text, not a
    database URL (an optuna storage of older versions), not a file, its parent present."""
    odd = next((c for c in text if not c.isprintable()), None)
    if odd is not None:
        raise ArchipelagoError(f"{option} '{text}': contains the control character "
                               f"{odd!r}; give printable text")
    if not text.strip():
        raise ArchipelagoError(f"{option} is empty; give a directory for the study journals, "
                               "e.g. archi-explore")
    if "://" in text:
        raise ArchipelagoError(f"{option} '{text}' is a database URL; studies are journal "
                               "files in a directory now: give a directory, e.g. "
                               f"{option} archi-explore")
    path, shown = Path(text), elide_path(text)
    found = probe(path, option)  # a name too long is one line, not pathlib's OSError
    if found is not None and not stat.S_ISDIR(found.st_mode):
        raise ArchipelagoError(f"{option} '{shown}' is not a directory; give a directory for "
                               "the study journals")
    if found is None and not is_dir(path.parent, option):
        raise ArchipelagoError(f"{option} '{shown}': directory "
                               f"{elide_path(str(path.parent))} does not exist")
    return path


def study_file(storage: Path, study: str) -> Path:
    """The study's journal in `storage`: its name, escaped so distinct studies get
    distinct files and none leaves the directory; a long one shortened with its digest."""
    name = quote(study, safe=" +,=@-_") + SUFFIX
    if name.startswith("."):
        name = "%2E" + name[1:]
    if len(name.encode()) > NAME_MAX:
        name = f"{name[:NAME_MAX - 30]}-{digest(study)}{SUFFIX}"
    return storage / name


def open_study(storage: Path, study: str, identity: StudyIdentity) -> Journal:
    """The study's journal, made with `identity` if new; one that holds another search is
    refused in one line naming the field that differs."""
    storage.mkdir(exist_ok=True)
    labels = {**identity.labels, "study": study}
    try:
        return Journal.open(study_file(storage, study), KIND, identity.key, labels)
    except ArchipelagoError as err:
        reason = str(err).removesuffix("; give another file name")
        raise ArchipelagoError(f"study '{study}' in --storage '{storage}': {reason}; choose "
                               "another --study (or --storage)") from None


class MemoryStudy:
    """A study that lives only as long as the run (benchmarks and library calls with no
    storage): the journal's `records` and `append_within`, in a dict."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}

    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self._records)

    def append_within(self, items: Sequence[tuple[str, dict[str, Any]]], budget: int) -> int:
        taken = 0
        for key, value in items:
            if key not in self._records and len(self._records) >= budget:
                break
            self._records[key] = value
            taken += 1
        return taken
