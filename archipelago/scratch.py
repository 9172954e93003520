"""Where `archi` keeps files nobody named (docs/hostile-input.md): what outlives a command
goes in the cache directory, and everything a command needs only while it runs goes in one
temporary directory the command makes and removes when it ends, however it ends short of
SIGKILL (and then too where an emulation's reaper runs). The libraries it runs write there
too: Dask's worker scratch space and the emulation's run directories (both under the
temporary folder Python reports, which `owned_scratch` points at the command's directory,
for its child processes as well), and onnxruntime, whose telemetry would keep a device id
and a database in ~/.cache/Microsoft/DeveloperTools and a `.ses` file in $TMPDIR (its
ORT_DISABLE_TELEMETRY switch turns it off, files included). The cache directory itself is
archipelago/cache_dir.py's.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# What a command's child processes inherit: the temporary folder, and onnxruntime's
# telemetry off (read when onnxruntime starts its environment, in whichever process).
_CHILD_ENV = ("TMPDIR", "ORT_DISABLE_TELEMETRY")
_OWNED: list[Path] = []  # the scratch directories of the commands running, innermost last


def current_scratch() -> Path | None:
    """The running command's scratch directory (None outside a command): the emulation's
    reaper removes it too when a SIGKILL leaves no command to."""
    return _OWNED[-1] if _OWNED else None


@contextmanager
def owned_scratch() -> Iterator[Path]:
    """A temporary directory for one command, which Python's `tempfile` (in this process
    and, through TMPDIR, in every child) uses while the block runs; removed, with
    whatever was written in it, when the block ends. The environment and `tempfile` are
    restored after, so commands run one after another in one process (tests) each get
    their own."""
    saved = {name: os.environ.get(name) for name in _CHILD_ENV}
    saved_tempdir = tempfile.tempdir  # None until first asked: then read from TMPDIR
    path = Path(tempfile.mkdtemp(prefix="archipelago-"))
    os.environ.update({"TMPDIR": str(path), "ORT_DISABLE_TELEMETRY": "1"})
    tempfile.tempdir = str(path)
    _OWNED.append(path)
    try:
        yield path
    finally:
        _OWNED.remove(path)
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(path, ignore_errors=True)
