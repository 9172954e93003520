"""Packages outside the repository extend Archipelago through entry points: strategies and
plan kinds (`archipelago.strategies`), model and cluster families (`archipelago.families`)."""

from importlib.metadata import entry_points

from archipelago.errors import ArchipelagoError


def load_entry_points(group: str) -> None:
    """Import every module of entry point `group` (importing one registers what it adds); a
    broken plug-in is one line naming it, not a traceback."""
    for entry in entry_points(group=group):
        try:
            entry.load()
        except Exception as err:
            raise ArchipelagoError(f"entry point '{entry.name}' ({entry.value}) of group "
                                   f"{group} failed to load: {err}") from None
