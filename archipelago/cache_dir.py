"""Where Archipelago keeps what it computed once per machine (docs/emulation.md, "Weights
cache"; docs/models.md, "Config files read by transformers"; docs/compare.md): the seeded
weights of emulation ranks, the structure read from a config file, compare's default
stores and the explore store of searched engines and studies (`plan --engine best`,
compare's rows, `archi explore` without `--storage`; docs/explore.md), each in its own
folder. A store the user did not name lives here, never in the working directory.

    ARCHIPELAGO_CACHE_DIR      where (default $XDG_CACHE_HOME/archipelago, else
                               ~/.cache/archipelago)
"""

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

from archipelago.errors import ArchipelagoError, Notice, elide_path

DIR_ENV = "ARCHIPELAGO_CACHE_DIR"


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """The cache directory (not created here)."""
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "archipelago"


def cache_folder(name: str, what: str, instead: str) -> Path:
    """The cache directory's folder `name`, made if missing. The run that makes it says so
    in one notice line (`what` lives there; `instead`, the option choosing another place),
    so a user learns once where the files they did not name went; a folder that cannot be
    made is one error line naming `instead` and the variable that moves the cache."""
    folder = cache_root() / name
    if folder.is_dir():
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ArchipelagoError(f"the cache directory {elide_path(str(folder))} cannot be "
                               f"made ({err.strerror or err}); set {DIR_ENV} or give "
                               f"{instead}") from None
    warnings.warn(Notice(f"{what} kept in {elide_path(str(folder))} (the per-user cache "
                         f"directory, ${DIR_ENV} to move it; {instead} chooses another)"),
                  stacklevel=2)
    return folder
