"""`archi build --strategy persistent` (issue 37 point 2): the host program of Table I calls,
compiled with g++ against the reference API and run, prints what `archi emulate` computes on
the same plan and seed: LSTM outputs, and an NMT's beam-searched words, encoder states and
last attentional state.

Tolerance: the cards' INT8 products and int32 sums are exact on both sides, and the
quantization is the same FP32 arithmetic; the C++ side's expf/tanhf/logf and sums differ
from numpy's by FP32 ulps (measured: at most 1e-7 on these models), so values must agree
within 1e-5; words exactly."""

import json
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.strategies.host_offload.apps import run_app
from archipelago.strategies.host_offload.emit import write_build
from archipelago.strategies.host_offload.emulate import run_seeded
from archipelago.strategies.host_offload.emulate.card import LocalCard
from archipelago.strategies.host_offload.emulate.executor import Executor
from archipelago.strategies.host_offload.emulate.weights import card_block, make_weights
from archipelago.strategies.host_offload.plan import HostPlan
from tests.cli_here import archi_here

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="g++ is not installed")
FLAGS = ["-std=c++17", "-O1", "-ffp-contract=off", "-fno-exceptions"]
TOLERANCE = 1e-5
CASES = {  # the smallest sizes the apps take that still split every matrix over cards
    "lstm": ("lstm", "2xs10-2800", {"hidden": 8, "steps": 3, "layers": 2}),
    "luong-beam": ("nmt-luong", "2xs10-2800", {"hidden": 16, "steps": 4, "vocab": 16,
                                               "beam": 2}),
    "li-beam": ("nmt-li", "3xs10-2800", {"hidden": 12, "steps": 3, "vocab": 16, "beam": 3}),
}


@pytest.fixture(scope="module")
def api_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference API compiled once (every build ships the same one)."""
    from importlib import resources

    folder = tmp_path_factory.mktemp("api")
    source = resources.files("archipelago.strategies.host_offload.emit") / "cpp"
    for name in ("archi_api.h", "archi_api_ref.cpp"):
        (folder / name).write_text((source / name).read_text())
    subprocess.run([GXX, *FLAGS, "-c", "archi_api_ref.cpp", "-o", "archi_api_ref.o"],
                   cwd=folder, check=True)
    return folder / "archi_api_ref.o"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, api_object: Path
          ) -> Callable[[str], tuple[HostPlan, Path]]:
    """A case's plan and build, its main.cpp compiled against the reference API (once per
    case: the same binary runs any build directory of that plan)."""
    made: dict[str, tuple[HostPlan, Path]] = {}

    def build(case: str) -> tuple[HostPlan, Path]:
        if case not in made:
            model, cluster, engine = CASES[case]
            plan = make_plan(model, cluster, "persistent", engine)
            out = tmp_path_factory.mktemp(case)
            write_build(plan, str(out), False)
            subprocess.run([GXX, *FLAGS, "-c", "host/main.cpp", "-o", "main.o"], cwd=out,
                           check=True)
            subprocess.run([GXX, "main.o", str(api_object), "-o", "app"], cwd=out, check=True)
            made[case] = plan, out
        return made[case]
    return build


def _run(app: Path, build_dir: Path) -> dict[str, list[str]]:
    """Run a compiled program on a build directory; what it prints, by name."""
    done = subprocess.run([str(app), str(build_dir)], check=True, capture_output=True,
                          text=True)
    return {name: fields for name, *fields in map(str.split, done.stdout.splitlines())}


def _values(fields: list[str], rows_cols: bool) -> np.ndarray:
    rows, cols = int(fields[0]), int(fields[1])
    values = np.array(fields[2:], dtype=np.float64).astype(np.float32)
    assert values.size == rows * cols
    return values.reshape(rows, cols) if rows_cols else values


@pytest.mark.parametrize("case", CASES)
def test_the_compiled_program_prints_what_the_emulation_computes(
        case: str, built: Callable[[str], tuple[HostPlan, Path]]) -> None:
    plan, out = built(case)
    printed = _run(out / "app", out)
    run = run_seeded(plan, 0, in_process=True)
    if case == "lstm":
        got = _values(printed["outputs"], True)
        assert np.abs(got - np.stack(run.result)).max() <= TOLERANCE
        return
    tokens = [int(t) for t in printed["tokens"][1:]]
    assert tokens == run.result["tokens"] and len(tokens) == plan.steps
    assert np.abs(_values(printed["encoder"], True) - np.stack(run.result["encoder"])
                  ).max() <= TOLERANCE
    assert np.abs(_values(printed["feed"], False) - run.result["feed"]).max() <= TOLERANCE


def test_the_beam_search_is_decided_when_the_program_runs(
        tmp_path: Path, built: Callable[[str], tuple[HostPlan, Path]]) -> None:
    """The same binary on another source sentence gives the emulation's words for that
    sentence: the kept words and hypotheses are computed by the program, not written in."""
    plan, out = built("luong-beam")
    shutil.copytree(out / "host", tmp_path / "host")
    shutil.copytree(out / "cards", tmp_path / "cards")
    source = [5, 3, 14, 7]
    (tmp_path / "host/data/source.txt").write_text(" ".join(map(str, source)))
    weights, biases, host = make_weights(plan.spec, 0, plan.steps)
    executor = Executor(plan.layout, [LocalCard(k) for k in range(plan.cards)], weights,
                        biases, host)
    expected = run_app(executor, plan.spec, plan.layout, plan.steps, source)["tokens"]
    again = [int(t) for t in _run(out / "app", tmp_path)["tokens"][1:]]
    first = [int(t) for t in _run(out / "app", out)["tokens"][1:]]
    assert again == expected and again != first


def _read_mrf(data: bytes) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray | None]:
    """The block file format read back independently of the writer."""
    assert data[:4] == b"AMRF"
    rows, count, has_bias = struct.unpack("<3i", data[4:16])
    at, segments = 16, []
    for _ in range(count):
        (cols,) = struct.unpack("<i", data[at:at + 4])
        q = np.frombuffer(data, np.int8, rows * cols, at + 4).reshape(rows, cols)
        at += 4 + rows * cols
        scale = np.frombuffer(data, "<f4", rows, at)
        at += 4 * rows
        segments.append((q, scale))
    bias = np.frombuffer(data, "<f4", rows, at) if has_bias else None
    assert at + (4 * rows if has_bias else 0) == len(data)
    return segments, bias


def test_each_card_holds_its_own_blocks_and_nothing_else(tmp_path: Path) -> None:
    model, cluster, engine = CASES["luong-beam"]
    plan = make_plan(model, cluster, "persistent", engine)
    summary = write_build(plan, str(tmp_path), False)
    weights, biases, _ = make_weights(plan.spec, 0, plan.steps)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["calls_per_inference"] == len(plan.program.calls)
    placed = []
    for card in range(plan.cards):
        blocks = plan.layout.card_blocks(card)
        files = sorted(p.name for p in (tmp_path / f"cards/card{card}/mrfs").iterdir())
        assert files == sorted(f"{b.name}.bin" for b in blocks)
        for block in blocks:
            segments, bias = _read_mrf((tmp_path / f"cards/card{card}/mrfs/{block.name}.bin"
                                        ).read_bytes())
            want, _, want_bias = card_block(plan.layout, block, weights, biases)
            assert all(np.array_equal(q, wq) and np.array_equal(s, ws)
                       for (q, s), (wq, ws) in zip(segments, want, strict=True))
            assert (bias is None) == (want_bias is None)
            placed += [(block.matrix, r) for a, z in block.rows for r in range(a, z)]
    for name, (rows, _) in plan.spec.matrices().items():  # every row on exactly one card
        assert sorted(r for m, r in placed if m == name) == list(range(rows))
    assert all((tmp_path / f).is_file() for f in summary["files"])
    main = (tmp_path / "host/main.cpp").read_text()
    assert main.count("fpga_execute(") == plan.program.counts()["fpga_execute"]


def test_a_second_build_needs_force_and_the_cli_writes_one(tmp_path: Path) -> None:
    plan = make_plan(*CASES["lstm"][:2], "persistent", CASES["lstm"][2])
    write_build(plan, str(tmp_path / "b"), False)
    with pytest.raises(ArchipelagoError, match="not empty"):
        write_build(plan, str(tmp_path / "b"), False)
    command = ("build", "lstm", "--cluster", "2xs10-2800", "--strategy", "persistent",
               "--hidden", "8", "--steps", "2", "--layers", "1", "--out", str(tmp_path / "cli"))
    done = archi_here(*command, "--json")  # the program's options shape the build's plan
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["model"] == "lstm-8" and summary["calls"] == len(make_plan(
        "lstm", "2xs10-2800", "persistent", {"hidden": 8, "steps": 2, "layers": 1}
    ).program.calls)
    assert "cards/card1/mrfs/l0.fwd.wu@1.bin" in summary["files"]
    bad = archi_here(*command[:-1], str(tmp_path / "bad"), "--beam", "0")
    assert bad.returncode == 2 and "beam width 0" in bad.stderr and "Traceback" not in bad.stderr


def test_the_builds_own_compile_line_gives_the_same_program(
        tmp_path: Path, built: Callable[[str], tuple[HostPlan, Path]]) -> None:
    """What the build's README says to run (main.cpp unoptimized, the API at -O2) prints
    what the tests' -O1 binary prints: main.cpp has no FP32 arithmetic of its own."""
    _, out = built("lstm")
    for part in ("host", "cards"):
        shutil.copytree(out / part, tmp_path / part)
    command = json.loads((out / "manifest.json").read_text())["compile"]
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    assert _run(tmp_path / "app", tmp_path) == _run(out / "app", out)
