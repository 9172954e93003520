"""Where a study lives: the optuna storage URL a user gives, checked before any work, and
opened so that SQLite keeps every committed trial of a killed search."""

import warnings
from typing import Any

from archipelago.errors import ArchipelagoError

PERSIST = "a study must persist for a search to resume; give a file, e.g. " \
          "sqlite:///archi-explore.db"


def check_storage_url(url: str, option: str = "--storage") -> str:
    """`url` if a study can live there: printable text (the URL names a database file,
    where a newline would be kept) and not an in-memory database (gone when the run ends)."""
    odd = next((c for c in url if not c.isprintable()), None)
    if odd is not None:
        raise ArchipelagoError(f"{option} '{url}': contains the control character "
                               f"{odd!r}; give printable text")
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not url.strip():
        raise ArchipelagoError(f"{option} is empty; {PERSIST}")
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url  # not a database URL: optuna's refusal, on one line, says so
    if parsed.get_backend_name() == "sqlite" and (
            ":memory:" in (parsed.database or ":memory:")
            or parsed.query.get("mode") == "memory"):
        raise ArchipelagoError(f"{option} '{url}' is an in-memory database; {PERSIST}")
    return url


def open_storage(url: str) -> Any:
    """The optuna storage at `url`; SQLite in WAL mode: a third faster per trial, and a
    killed search still keeps every committed trial (WAL only relaxes durability against
    power loss). SQLAlchemy's warnings about the URL (an option the driver ignores) are
    raised as errors: a run must not go on with half its URL ignored."""
    import optuna
    from sqlalchemy import event
    from sqlalchemy.exc import SAWarning

    if not url:
        return None  # in memory: nothing persists (benchmarks, quick looks)
    if not url.startswith("sqlite"):
        return url
    with warnings.catch_warnings():
        warnings.simplefilter("error", SAWarning)
        storage = optuna.storages.RDBStorage(url)

    @event.listens_for(storage.engine, "connect")
    def _wal(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    storage.engine.dispose()  # reconnect so the pragmas apply
    return storage
