"""Packages outside the repository extend Archipelago through entry points: strategies and
plan kinds (`archipelago.strategies`), model and cluster families (`archipelago.families`)."""

from functools import cache
from importlib.metadata import EntryPoints, entry_points

from archipelago.errors import ArchipelagoError


@cache
def _installed() -> EntryPoints:
    """Every installed distribution's entry points, read once: each lookup otherwise reads
    every distribution's metadata again (three lookups in every `archi plan`)."""
    return entry_points()


def load_entry_points(group: str) -> None:
    """Import every module of entry point `group` (importing one registers what it adds); a
    broken plug-in is one line naming it, not a traceback."""
    for entry in _installed().select(group=group):
        try:
            entry.load()
        except Exception as err:
            raise ArchipelagoError(f"entry point '{entry.name}' ({entry.value}) of group "
                                   f"{group} failed to load: {err}") from None
