"""Where Archipelago keeps what it computed once per machine (docs/emulation.md, "Weights
cache"; docs/models.md, "Config files read by transformers"; docs/compare.md): the seeded
weights of emulation ranks, the structure read from a config file, compare's default
stores and the explore store of searched engines (`plan --engine best`, compare's rows;
docs/explore.md), each in its own folder.

    ARCHIPELAGO_CACHE_DIR      where (default $XDG_CACHE_HOME/archipelago, else
                               ~/.cache/archipelago)
"""

import os
from collections.abc import Mapping
from pathlib import Path

DIR_ENV = "ARCHIPELAGO_CACHE_DIR"


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """The cache directory (not created here)."""
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "archipelago"
