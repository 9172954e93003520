"""Files the tests export (ONNX, .pt2) made once per test run and read by every test that
wants the same export: under pytest-xdist in the run's folder all workers share, a lock per
file, so tests split between workers (`--dist worksteal`) never export one network twice (a
dynamo export costs seconds, issue 36 point 5). The tests only read these files; a test that
edits an export copies it first."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_folder(factory: pytest.TempPathFactory, name: str) -> Path:
    """`name` under this run's base folder, the one every xdist worker of the run shares."""
    run = factory.getbasetemp()
    folder = (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / name
    folder.mkdir(exist_ok=True)
    return folder


def once(folder: Path, key: str, make: Callable[[Path], Path]) -> Path:
    """The file `make(folder)` writes for `key`, made by the first test that asks for it."""
    done = folder / f"{key}.done"
    with FileLock(folder / f"{key}.lock"):
        if not done.exists():
            done.write_text(make(folder).name)
    return folder / done.read_text()


def onnx_networks(factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`get(name, dynamo, fold=True, opset=None)`: tests/onnx_networks.py's export of
    `name`, made once per run."""
    from tests.onnx_networks import export

    folder = run_folder(factory, "onnx_networks")

    def get(name: str, dynamo: bool, fold: bool = True, opset: int | None = None) -> Path:
        key = f"{name}-{'dynamo' if dynamo else 'legacy'}-fold{int(fold)}-opset{opset}"
        return once(folder, key, lambda out: export(name, out / f"{key}.onnx", dynamo, fold,
                                                     opset=opset))
    return get
