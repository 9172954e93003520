"""LORA's build (`archi build --strategy lora-f/lora-q`, issue 37 point 3): every board's
layout read back against the model's own tensors and seeds/002 §III's split, the schedule
against §III-A's syncs, the engine header compiled by g++ against the published designs
(seeds/002 §VI-A-d), on a ring and on a rack of stages."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archipelago.api import build, make_plan
from archipelago.cli import app
from archipelago.errors import ArchipelagoError
from archipelago.models.weights import all_weights
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.lora_build.emit import write_build
from tests.lora_readback import check_ranges, count, layouts

SPEC = resolve_model("gpt2-345m")  # hidden 1024, 16 heads, FFN 4096, 24 layers, tied head
RUNNER = CliRunner()


@pytest.fixture(scope="module")
def lora_q(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lora") / "q"
    result = RUNNER.invoke(app, ["build", "gpt2-345m", "--cluster", "4xu280", "--strategy",
                                 "lora-q", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out


def _expected(name: str, memory: str, ranks: int) -> int:
    """How often seeds/002 §III's split places each element of `name` in `memory` over a
    ring of `ranks`: every layer tensor column-split (Q/K/V by heads) once over the ring, a
    matrix's decode copy in HBM and its prefill copy in DDR (§V-C), biases and norms in DDR;
    the final norm split; the token and position tables whole in DDR on every board; the
    tied LM head's HBM copy split by vocabulary."""
    if name.startswith("layers.") or name.startswith("final_norm"):
        return 1
    if memory == "ddr":
        return ranks
    return 1  # embed_tokens' HBM copy: the head, one vocabulary slice a board


def test_every_weight_is_placed_exactly_once_and_no_ranges_overlap(lora_q: Path) -> None:
    boards = layouts(lora_q)
    assert [b["board"] for b in boards] == [0, 1, 2, 3]
    for board in boards:
        check_ranges(board)
    counts = count(SPEC, boards)
    matrices = {"q", "k", "v", "attn_out", "ffn_up", "ffn_down"}
    names = {t for t, _ in counts}
    assert names == {t.name for t in all_weights(SPEC)}  # every tensor of the model
    for (name, memory), marks in counts.items():
        want = _expected(name, memory, 4)
        assert (marks == want).all(), (name, memory, np.unique(marks))
        if name.endswith(".weight") and name.split(".")[-2] in matrices:
            assert {m for n, m in counts if n == name} == {"hbm", "ddr"}


def test_kv_ranges_hold_every_token_and_are_apart_from_weights(lora_q: Path) -> None:
    for board in layouts(lora_q):
        kv = [r for r in board["regions"] if r["kind"] == "kv"]
        for layer in range(24):
            for part in ("k", "v"):
                mine = [r for r in kv if r["layer"] == layer and r["part"] == part]
                tokens = sorted(t for r in mine for t in range(*r["tokens"]))
                assert tokens == list(range(1024))
                for r in mine:  # 4 heads of 64 a board, INT8 under W8A8 (§IV-B-c)
                    assert r["width"] == 256 and r["bits"] == 8
                    assert r["heads"] == [4 * board["rank"], 4 * board["rank"] + 4]
                    assert r["bytes"] == (r["tokens"][1] - r["tokens"][0]) * 256
        # 864 URAMs of 36 KiB hold 24 layers x 1024 tokens x 512 values: all on chip
        assert {r["memory"] for r in kv} == {"uram"}
        assert sum(r["bytes"] for r in kv) == 24 * 1024 * 512 <= 864 * 36 * 1024


def test_tiles_stream_the_local_input_first(lora_q: Path) -> None:
    """Rank 1 of 4 owns hidden columns 256-511: its q tiles start at tile row 4 (T_m 64),
    then its ring neighbours' (ranks 2 and 0), then rank 3's (§III-B, fourth method)."""
    board = layouts(lora_q)[1]
    q = next(r for r in board["regions"] if r["name"] == "layers.0.q.weight@hbm")
    assert q["row_blocks"] == [4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 12, 13, 14, 15]
    assert q["cols"] == [256, 512] and q["bytes"] == 1024 * 256  # INT8 (W8A8)


def test_schedule_has_four_gathers_and_two_reduces_a_block(lora_q: Path) -> None:
    schedule = json.loads((lora_q / "schedule.json").read_text())
    [stage] = schedule["stages"]
    [block] = stage["blocks"]
    assert block["layers"] == list(range(24))
    syncs = [(s["sync"], s["after"], s.get("hidden_by"), s["overlap"])
             for s in block["prompt"] if "sync" in s]
    assert syncs == [
        ("all_reduce", "attn_norm", None, "row_groups"),
        ("all_gather", "attn_norm", ["v", "k", "q"], "matmul_blocks"),
        ("all_gather", "attn_context", ["attn_out"], "matmul_blocks"),
        ("all_reduce", "ffn_norm", None, "row_groups"),
        ("all_gather", "ffn_norm", ["ffn_up"], "matmul_blocks"),
        ("all_gather", "ffn_act", ["ffn_down"], "matmul_blocks")]
    early = [s["after"] for s in block["prompt"] if s.get("early")]
    assert early == ["attn_context"]  # SmulV's heads leave as each is done (third method)
    # LayerNorm sums travel in groups of 256-bit port / 8-bit rows = 32 rows (§VI-C)
    assert {s["rows_per_group"] for s in block["prompt"] if "rows_per_group" in s} == {32}


def _compile_and_run(tmp_path: Path, header: Path, asserts: list[str]) -> None:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    source = tmp_path / "check.cpp"
    checks = "\n".join(f"static_assert({a}, \"{a}\");" for a in asserts)
    source.write_text(f'#include "{header}"\n#include <cstring>\n{checks}\n'
                      "int main() { return std::strlen(LORA_FORMAT) == 0; }\n")
    binary = tmp_path / "check"
    done = subprocess.run([gxx, "-std=c++17", "-Wall", "-Werror", str(source), "-o",
                           str(binary)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert subprocess.run([str(binary)], timeout=30).returncode == 0


def test_lora_q_header_compiles_with_the_published_design(lora_q: Path, tmp_path: Path
                                                          ) -> None:
    """LORA-Q (§VI-A-d, Table IV): 64 x 64 at 250 MHz, W8A8; board 2 of 4 on gpt2-345m
    holds hidden columns 512-767, heads 8-11, FFN columns 2048-3071."""
    _compile_and_run(tmp_path, lora_q / "board2" / "lora_engine.h", [
        "LORA_CLOCK_HZ == 250000000", "LORA_D_SA == 64", "LORA_T_M == 64",
        "LORA_T_V == 64", "LORA_N_ACC == 256", "LORA_HBM_CHANNELS == 32",
        "LORA_KV_URAM == 864", "LORA_WEIGHT_BITS == 8", "LORA_ACT_BITS == 8",
        "LORA_TILE_BYTES == 64 * 64", "LORA_PACK_ROWS == 32", "LORA_RANK == 2",
        "LORA_COL_START == 512", "LORA_LOCAL_COLS == 256", "LORA_HEAD_START == 8",
        "LORA_LOCAL_HEADS == 4", "LORA_FFN_START == 2048", "LORA_LOCAL_FFN == 1024",
        "LORA_LAYERS == 24", "LORA_MPU_DSP == 64 * 64 / 2"])


def test_lora_f_w4a16_tiles_and_scales_and_header(tmp_path: Path) -> None:
    """W4A16 on LORA-F's 48 x 48 tiles: two INT4 a byte, 1,152 bytes a tile; one FP16
    scale per 128 input rows of each column (number_formats.GROUP_SIZE)."""
    out = tmp_path / "f"
    build("gpt2-345m", "4xu280", "lora-f", str(out), engine={"precision": "w4a16"})
    board = layouts(out)[0]
    check_ranges(board)
    regions = {r["name"]: r for r in board["regions"]}
    q = regions["layers.0.q.weight@hbm"]
    # 1024 rows / 48 -> 22 tile rows, 256 columns / 48 -> 6 tile columns
    assert (q["bits"], q["tile_bytes"], q["bytes"]) == (4, 1152, 22 * 6 * 1152)
    assert regions["layers.0.q.weight.scales@hbm"]["bytes"] == 8 * 256 * 2
    counts = count(SPEC, [board])
    assert (counts[("layers.0.q.weight", "hbm")][:, :256] == 1).all()
    assert (counts[("layers.0.q.weight", "hbm")][:, 256:] == 0).all()
    _compile_and_run(tmp_path, out / "board0" / "lora_engine.h", [
        "LORA_CLOCK_HZ == 200000000", "LORA_D_SA == 48", "LORA_T_M == 48",
        "LORA_WEIGHT_BITS == 4", "LORA_ACT_BITS == 16", "LORA_GROUP_SIZE == 128",
        "LORA_TILE_BYTES == 1152", "LORA_LOCAL_VOCAB == 12565"])


def test_a_rack_of_stages_places_each_layer_on_its_stage(tmp_path: Path) -> None:
    plan = make_plan("gpt2-345m", "2x4xu280", "lora-f", workload={"split": "tp=4,pp=2"})
    summary = write_build(plan, tmp_path / "rack")
    assert summary["stages"] == 2 and summary["boards"] == 8
    boards = layouts(tmp_path / "rack")
    for board in boards:
        check_ranges(board)
    split = {b["stage"]: b["layers"] for b in boards}
    assert split[0][0] == 0 and split[0][1] == split[1][0] and split[1][1] == 24
    counts = count(SPEC, boards)
    for (name, memory), marks in counts.items():
        assert (marks == _expected(name, memory, 4)).all(), (name, memory)
    first = {r["tensor"] for b in boards if b["stage"] == 0 for r in b["regions"]
             if r["kind"] != "kv"}
    assert "embed_positions.weight" in first and "final_norm.weight" not in first
    schedule = json.loads((tmp_path / "rack" / "schedule.json").read_text())
    assert [("embed" in s, "output" in s) for s in schedule["stages"]] == [
        (True, False), (False, True)]


def test_build_stays_inside_out_and_keeps_a_previous_build(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build("gpt2-345m", "1xu280", "lora-q", str(out))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert sorted(p.name for p in out.iterdir()) == ["board0", "schedule.json",
                                                     "summary.json"]
    with pytest.raises(ArchipelagoError, match="not empty; pass --force"):
        build("gpt2-345m", "1xu280", "lora-f", str(out))
    assert json.loads((out / "summary.json").read_text())["strategy"] == "lora-q"


def test_build_refusal_names_only_strategies_that_build(tmp_path: Path) -> None:
    """The refusal of a kind without writers lists strategies from the registry; each of
    them writes files."""
    with pytest.raises(ArchipelagoError) as refused:
        get_strategy("gpu-eager").plan_kind.hook("writers")
    listed = str(refused.value).split("strategies with build files: ")[1].split(", ")
    assert {"dfx", "lora-f", "lora-q", "galapagos", "persistent", "chef", "h2h"} <= set(listed)
    pytest.importorskip("hls4ml")
    layers = tmp_path / "layers.yaml"  # a conv and an FC: what hls4ml converts
    layers.write_text("name: two\nlayers:\n"
                      "  - {name: c, type: conv, in_ch: 2, out_ch: 4, kernel: 3, out_rows: 4,"
                      " out_cols: 4}\n"
                      "  - {name: f, type: fc, in_features: 64, out_features: 3, deps: [c]}\n")
    models = {"tensor-parallel": ("gpt2-345m", "1xu280"),
              "dataflow": ("ibert-base", "72xsidewinder"),
              "host-program": ("lstm", "2xs10-2800"),
              "scheduled-dag": (str(layers), "hacc")}
    # chef-exact enumerates every deployment: two IPs, one per FPGA, keep it to a few
    engines = {"chef-exact": {"ips": ["conv_8_16", "fc_8_16"], "max_accs_per_fpga": 1}}
    for name in listed:
        model, cluster = models[get_strategy(name).kind]
        summary = build(model, cluster, name, str(tmp_path / name), engine=engines.get(name))
        assert summary["files"] and all((tmp_path / name / f).is_file()
                                        for f in summary["files"])


def test_build_takes_the_plan_s_precision_option(tmp_path: Path) -> None:
    """`archi build --precision w4a16` builds what `plan --precision w4a16` plans: the same
    4-bit tiles as the engine config above, a refused format in one line."""
    from tests.cli_here import archi_here

    run = archi_here("build", "gpt2-345m", "--cluster", "4xu280", "--strategy", "lora-f",
                     "--precision", "w4a16", "--out", str(tmp_path / "cli"))
    assert run.returncode == 0, run.stderr
    regions = {r["name"]: r for r in layouts(tmp_path / "cli")[0]["regions"]}
    assert regions["layers.0.q.weight@hbm"]["bits"] == 4
    refused = archi_here("build", "gpt2-345m", "--cluster", "4xu280", "--strategy", "dfx",
                         "--precision", "w8a8", "--out", str(tmp_path / "dfx"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "DFX computes in FP16" in refused.stderr
