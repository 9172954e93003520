"""The seeded-weights cache of torchrun ranks (docs/emulation.md, "Weights cache"): a
checkpoint made once per machine and reused by later runs, under a cache directory rather
than the temp folder, with a size cap.

    ARCHIPELAGO_CACHE_DIR      where (archipelago/cache_dir.py)
    ARCHIPELAGO_CACHE_MAX_GIB  the cap in GiB (default 4): after a new entry is written, the
                               least recently used entries go until the rest fit

An entry is named by a digest of what determines its content (the caller's key: model
config, seed, library versions). Each entry has a make lock: its writer holds it
exclusively (the other ranks of the node wait, then reuse); and a use lock: every process
using the entry holds it shared until it exits, and eviction skips an entry it cannot lock
exclusively, so no run loses weights it is reading. Nothing is created until a rank asks
for an entry (after it joined its process group)."""

import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from archipelago.cache_dir import DIR_ENV as DIR_ENV  # re-exported: the variable users set
from archipelago.cache_dir import cache_root
from archipelago.errors import ArchipelagoError

CAP_ENV = "ARCHIPELAGO_CACHE_MAX_GIB"
DEFAULT_CAP_GIB = 4.0
GIB = 2**30
_PARTIAL = ".partial-"  # an entry being written, renamed into place when complete
_IN_USE: list[IO] = []  # lock files this process holds shared: entries it reads


def cache_cap_bytes(env: Mapping[str, str] = os.environ) -> int:
    """The size cap; a value that is not a positive number of GiB is a one-line error."""
    text = env.get(CAP_ENV, "").strip()
    if not text:
        return int(DEFAULT_CAP_GIB * GIB)
    try:
        gib = float(text)
    except ValueError:
        gib = math.nan
    if not 0 < gib < 2**20:
        raise ArchipelagoError(f"environment: {CAP_ENV}={text[:20]!r} is not valid (need a "
                               f"number of GiB in (0, {2**20}), default {DEFAULT_CAP_GIB:g})")
    return int(gib * GIB)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def evict(root: Path, cap: int, keep: Path) -> None:
    """Remove least recently used entries (by modification time, which every use renews)
    until the cache fits `cap`; `keep` and entries in use stay."""
    entries = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime)
    total = sum(_size(p) for p in entries)
    for entry in entries:
        if total <= cap:
            return
        if entry == keep:
            continue
        with open(f"{entry}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a running emulation reads it
                continue
            size = _size(entry)
            shutil.rmtree(entry, ignore_errors=True)
            total -= size


def cached_directory(kind: str, key: object, make: Callable[[Path], Path],
                     env: Mapping[str, str] = os.environ) -> Path:
    """The entry for (`kind`, `key`), made by `make(directory)` if absent, then kept in use
    (a shared lock) by this process until it exits."""
    cap = cache_cap_bytes(env)
    root = cache_root(env)
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(json.dumps([kind, key], sort_keys=True).encode()).hexdigest()
    directory = root / f"{kind}-{digest[:16]}"
    lock = open(f"{directory}.lock", "a")  # noqa: SIM115 - held until this process exits
    fcntl.flock(lock, fcntl.LOCK_SH)  # readers share the entry
    made = False
    if not directory.exists():
        # One rank per machine writes; the others wait on a lock of its own. Upgrading the
        # shared lock instead waited forever on a rank that had made the entry and kept it
        # shared, after this one had seen it missing (a torchrun run hung so).
        with open(f"{directory}.make", "a") as maker:
            fcntl.flock(maker, fcntl.LOCK_EX)
            made = not directory.exists()
            if made:  # written aside, then renamed: never seen half-written
                partial = Path(tempfile.mkdtemp(prefix=_PARTIAL, dir=root))
                try:
                    make(partial).rename(directory)
                finally:
                    shutil.rmtree(partial, ignore_errors=True)
    os.utime(directory)  # last use, for eviction
    _IN_USE.append(lock)
    if made:
        evict(root, cap, keep=directory)
    return directory
