"""Faults from outside the input: a stale or partial torchrun environment, and a disk that
fills up while a build is written. Each ends in one `error:` line, exit 2, and loses nothing
finished. (A rank killed mid-emulation is tests/test_emulate_failures.py's subject: one line
naming the rank, no process left behind.)"""

import errno
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.emulate import launch
from archipelago.emulate.torchrun import TorchrunPlace, torchrun_place
from archipelago.errors import ArchipelagoError

RUNNER = CliRunner()
TORCHRUN = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT")


@pytest.mark.parametrize(("env", "message"), [
    ({"RANK": "abc", "WORLD_SIZE": "2", **TORCHRUN}, "RANK='abc' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "-1", **TORCHRUN}, "WORLD_SIZE='-1' is not valid"),
    ({"RANK": "2", "WORLD_SIZE": "2", **TORCHRUN}, "RANK='2' is not valid"),
    ({"RANK": "0"}, "RANK='0' is set but WORLD_SIZE is not"),
    ({"WORLD_SIZE": "4"}, "WORLD_SIZE='4' is set but RANK is not"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR and MASTER_PORT not"),
    ({"RANK": "\u00b2", "WORLD_SIZE": "4", **TORCHRUN}, "RANK='\u00b2' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "\u0663", **TORCHRUN}, "WORLD_SIZE='\u0663' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "0", **TORCHRUN}, "WORLD_SIZE='0' is not valid (need 1 <="),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"},
     "MASTER_PORT='99999' is not valid (need 1 <= MASTER_PORT <= 65535)"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "-1"},
     "MASTER_PORT='-1' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc"},
     "MASTER_PORT='abc' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "abc", **TORCHRUN},
     "LOCAL_WORLD_SIZE='abc' is not valid (need 1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE = 2)"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "0", **TORCHRUN},
     "LOCAL_WORLD_SIZE='0' is not valid"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "1", **TORCHRUN},
     "LOCAL_RANK='1' is not valid (need 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE = 1)"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "nonexistent.invalid",
      "MASTER_PORT": "29500"}, "MASTER_ADDR='nonexistent.invalid' cannot be resolved"),
    ({"RANK": "0", "WORLD_SIZE": "4", **TORCHRUN}, "WORLD_SIZE=4 but the plan has 2 devices"),
])
def test_a_stale_or_partial_torchrun_environment_is_one_line_before_any_rank(
        env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_ranks(*args: object) -> None:
        raise AssertionError("a rank was about to start")

    monkeypatch.setattr(launch, "emulate_locally", no_ranks)
    monkeypatch.setattr(launch.worker, "run_torchrun_rank", no_ranks)
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # run_torchrun_rank writes the seeded weights: the check comes before it
    result = RUNNER.invoke(app, ["emulate", "gpt2-345m", "--cluster", "2xu280",
                                 "--tokens", "2:2"], env=env)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: environment: ")
    assert message in lines[0]


def test_a_complete_torchrun_environment_names_this_rank() -> None:
    assert torchrun_place({}) is None
    assert torchrun_place({"RANK": "1", "WORLD_SIZE": "4", **TORCHRUN}) == TorchrunPlace(1, 4, 4)
    assert torchrun_place({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                           "LOCAL_RANK": "1", **TORCHRUN}) == TorchrunPlace(3, 4, 2)
    with pytest.raises(ArchipelagoError, match="WORLD_SIZE='99999999' is not valid"):
        torchrun_place({"RANK": "0", "WORLD_SIZE": "99999999", **TORCHRUN})


def _build(out: Path, *extra: str) -> tuple[int, str]:
    result = RUNNER.invoke(app, ["build", "ibert-base", "--out", str(out),
                                 "--cluster", "72xsidewinder", "--json", *extra])
    return result.exit_code, result.stderr


def test_a_full_disk_midway_through_a_build_is_one_line_and_keeps_the_finished_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"
    code, _ = _build(out)
    assert code == 0
    finished = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert len(finished) > 5

    real_write = Path.write_text
    calls = {"n": 0}

    def filling_disk(self: Path, text: str, *args: object, **kwargs: object) -> int:
        calls["n"] += 1
        if calls["n"] > 4:  # the fifth file finds the disk full, half written
            real_write(self, text[:len(text) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", filling_disk)
    code, stderr = _build(out, "--force")
    monkeypatch.undo()

    lines = stderr.strip().splitlines()
    assert code == 2
    assert len(lines) == 1 and "No space left on device" in lines[0]
    assert "after 4 of the build's files" in lines[0]
    # Every file of the finished build is still whole (rewritten identically or untouched),
    # and no half-written file is left behind.
    now = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert now == finished
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kernels"] > 0


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*")}


def test_a_file_where_the_build_needs_a_folder_changes_nothing(tmp_path: Path) -> None:
    """`routing` is the user's file; the build needs a folder there. Found before any file
    moves: one line, and the directory (the user's file, no staging folder) is as it was."""
    out = tmp_path / "build"
    out.mkdir()
    (out / "routing").write_text("mine")
    before = _tree(out)
    code, stderr = _build(out, "--force")
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "routing is a file where the build needs a directory; nothing was changed" in stderr
    assert _tree(out) == before


def test_a_writer_failing_midway_leaves_no_new_directory(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh --out that a failed build created is removed again: no half build."""
    import archipelago.strategies.galapagos.emit as emit

    def broken(*args: object) -> str:
        raise ArchipelagoError("map.xml of cluster 0 cannot be rendered")

    monkeypatch.setattr(emit, "map_xml", broken)
    code, stderr = _build(tmp_path / "fresh")
    assert code == 2 and "cannot be rendered" in stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("out", "message"), [
    ("{tmp}/a_file/sub", "a_file is not a directory"),
    ("{tmp}/loop", "a loop of symbolic links"),
    ("/proc/archi_out", "cannot write in directory /proc"),
    ("{tmp}/" + "o" * 300, "is 300 bytes; the limit is 255"),
])
def test_a_build_target_that_cannot_be_written_is_refused_before_planning(
        tmp_path: Path, out: str, message: str) -> None:
    (tmp_path / "a_file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    code, stderr = _build(Path(out.format(tmp=tmp_path)))
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and message in stderr
