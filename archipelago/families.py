"""Families of the things a user names on the command line: models (a zoo name, a
config.json, a layer-DAG YAML, an ONNX file, ...) and clusters (`NxDEVICE`, a built-in
cluster, a cluster YAML). Each family says how to recognize a name (`matches`), how to
load it (`load`), which names it offers (`choices`, for the unknown-name error) and what
`archi catalog` lists of it (`catalog`). `resolve_model`, `resolve_cluster` and `archi
catalog` are loops over the registered families, so a new family is one `register_family`
call in its own module, like a new strategy.

Built-in families register when `models.zoo` and `hardware.cluster` are imported, naming
the code of a form by `module:attribute` path where its module is heavy (`refs.resolve`), so
resolving a zoo name imports no ONNX, torch.export or layer-DAG code; a package outside the
repository registers through the `archipelago.families` entry point group.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Literal

from archipelago.errors import UnknownNameError
from archipelago.plugins import load_entry_points

What = Literal["model", "cluster"]
ENTRY_POINT_GROUP = "archipelago.families"
# The modules whose import registers the built-in families.
_BUILTIN = {"model": "archipelago.models.zoo", "cluster": "archipelago.hardware.cluster"}


@dataclass(frozen=True)
class CatalogTable:
    """What `archi catalog` shows of a family: a titled table, and the same rows keyed by
    name under `key` in `--json`."""

    key: str
    title: str
    columns: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]]  # name -> one value per column after the name
    # What `--json` gives per name when it is not the shown row: raw counts rather than
    # "1,558 M", or fewer fields than the table (scripts read today's keys).
    json_rows: dict[str, dict[str, Any]] | None = None

    def as_json(self) -> dict[str, dict[str, Any]]:
        if self.json_rows is not None:
            return self.json_rows
        return {name: dict(zip(self.columns[1:], row, strict=True))
                for name, row in self.rows.items()}


@dataclass(frozen=True)
class Family:
    """One form a model or cluster name may take. Families are tried in `order` (lowest
    first); the first whose `matches` accepts the text loads it."""

    name: str
    what: What
    matches: Callable[[str], bool]
    load: Callable[[str], Any]
    choices: Callable[[], Sequence[str]] = field(default=lambda: ())
    catalog: Callable[[], CatalogTable] | None = None
    order: int = 100
    # The parameter count of a loaded model, for families whose models no catalog lists
    # (a config file): `archi plan` shows it beside the estimate.
    parameters: Callable[[Any], int] | None = None


_FAMILIES: dict[str, Family] = {}
_loaded: set[str] = set()


def register_family(family: Family) -> Family:
    """Add `family`; registering one name twice with different code is a programming error."""
    if family.name in _FAMILIES and _FAMILIES[family.name] != family:
        raise ValueError(f"family '{family.name}' registered twice")
    _FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    """Drop family `name` (a test's toy family, once the test is done)."""
    _FAMILIES.pop(name, None)


def families(what: What) -> list[Family]:
    """The registered families of models or clusters, in the order they are tried."""
    _load(what)
    return sorted((f for f in _FAMILIES.values() if f.what == what), key=lambda f: f.order)


def family_of(what: What, text: str) -> Family:
    """The first family that recognizes `text`; an unknown name is one line listing every
    family's choices."""
    candidates = families(what)
    for family in candidates:
        if family.matches(text):
            return family
    raise UnknownNameError(what, text, [c for f in candidates for c in f.choices()],
                           "archi catalog")


def resolve(what: What, text: str) -> Any:
    """The model or cluster `text` names, loaded by the first family that recognizes it."""
    return family_of(what, text).load(text)


def _load(what: What) -> None:
    """Import the module registering the built-in families of `what`, and every
    `archipelago.families` entry point, once."""
    if what in _loaded:
        return
    _loaded.add(what)
    import_module(_BUILTIN[what])
    load_entry_points(ENTRY_POINT_GROUP)
