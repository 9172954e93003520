"""DFX programs compiled from a dfx plan (seeds/001 Algorithm 1, §V-B), and `archi build`."""

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from archipelago.errors import ArchipelagoError
from archipelago.strategies.tensor_parallel.dfx_program.asm import parse_listing
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    Compute,
    Dma,
    DmaOp,
    Flag,
    Op,
    Program,
    Router,
    RouterOp,
    from_bytes,
)
from tests.cli_here import archi_here
from tests.rings import make_ring

HIDDEN, FFN, HEADS, D, L = 1024, 4096, 16, 64, 16  # gpt2-345m; DFX's tile (§V-B)


def _programs(cores: int) -> list[Program]:
    plan = make_ring("gpt2-345m", f"{cores}xu280", "dfx", None)
    return compile_plan(plan, 64, 64)[0]


@pytest.fixture(scope="module", params=[1, 4])
def programs(request: pytest.FixtureRequest) -> list[Program]:
    return _programs(request.param)


def test_a_layer_has_the_hand_counted_instructions(programs: list[Program]) -> None:
    """Per layer, n cores, h = 16 / n local heads: two LayerNorms of 2 parameter dmas and
    10 compute; six Conv1Ds of a bias and a weight dma; per head a K and a V row stored,
    K^T and V tiles loaded, MaskedMM, five softmax instructions and MM; two residual adds;
    four syncs of n - 1 send/recv hops each."""
    n = len(programs)
    h = HEADS // n
    for p in programs:
        kinds = Counter(type(i).__name__ for i in p.layer.instrs)
        assert kinds == {"Compute": 2 * 10 + 6 + 7 * h + 2,
                         "Dma": 2 * 2 + 6 * 2 + 2 * h + 2 * h,
                         **({"Router": 4 * 2 * (n - 1)} if n > 1 else {})}
        ops = Counter(i.op for i in p.layer.instrs if isinstance(i, Compute))
        assert (ops[Op.CONV1D], ops[Op.MASKED_MM], ops[Op.MM]) == (6, h, h)


def test_conv1d_tiles_are_the_shards_tiles(programs: list[Program]) -> None:
    n = len(programs)
    shards = {(HIDDEN, HIDDEN // n): 4, (HIDDEN, FFN // n): 1, (FFN, HIDDEN // n): 1}
    want = sum(count * (rows // D) * (cols // L) for (rows, cols), count in shards.items())
    for p in programs:
        convs = [i for i in p.layer.instrs if isinstance(i, Compute) and i.op == Op.CONV1D]
        assert sum((i.rows // D) * (i.cols // L) for i in convs) == want
        # each Conv1D's weight dma moves exactly its shard
        loads = {i.src: i.xfer_size for i in p.layer.instrs
                 if isinstance(i, Dma) and i.dst_loc.name == "WBUF"}
        assert all(loads[i.src2] == i.rows * i.cols for i in convs)


def test_value_before_key_and_query_and_value_stored_transposed() -> None:
    p = _programs(4)[2]
    notes = [n.split(" ")[0] for n in p.layer.notes]
    convs = [notes[k] for k, i in enumerate(p.layer.instrs)
             if isinstance(i, Compute) and i.op == Op.CONV1D]
    assert convs[:3] == ["v", "k", "q"]  # §V-B's reordering
    stores = [i for i in p.layer.instrs if isinstance(i, Dma) and i.op == DmaOp.STORE]
    assert [bool(i.flags & Flag.TRANSPOSE) for i in stores] == [True] * 4 + [False] * 4
    gelu = [notes[k] for k, i in enumerate(p.layer.instrs)
            if isinstance(i, Compute) and i.flags & Flag.GELU]
    assert gelu == ["ffn_up"]  # GELU(Conv1D) in SFU_M, Algorithm 1 line 21


def test_the_four_syncs_gather_every_slice_in_the_ring_order() -> None:
    """Each sync: core r receives, hop by hop, the slices of r-1, r-2, r-3, and sends its
    own first then what it received; after it every core holds the whole vector."""
    programs = _programs(4)
    for rank, p in enumerate(programs):
        hops = [i for i in p.layer.instrs if isinstance(i, Router)]
        assert len(hops) == 4 * 6
        for sync in range(4):
            part = hops[sync * 6:(sync + 1) * 6]
            sends, recvs = part[0::2], part[1::2]
            assert all(i.op == RouterOp.SEND for i in sends)
            assert all(i.op == RouterOp.RECV for i in recvs)
            assert sends[1:] == [Router(RouterOp.SEND, r.dst, r.dst, r.xfer_size)
                                 for r in recvs[:2]]
            # the vector's slices: this core's own (the first send) and the three received
            spans = sorted((i.dst, i.dst + i.xfer_size) for i in (sends[0], *recvs))
            assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        # a slice core r sends first is what core r + 1 receives first
        nxt = programs[(rank + 1) % 4]
        first_recv = next(i for i in nxt.layer.instrs
                          if isinstance(i, Router) and i.op == RouterOp.RECV)
        assert first_recv.dst == hops[0].src


def test_one_core_has_no_router_instructions_and_the_whole_vocabulary() -> None:
    (p,) = _programs(1)
    assert not any(isinstance(i, Router) for s in p.sections for i in s.instrs)
    head = next(i for i in p.epilogue.instrs if isinstance(i, Compute) and i.op == Op.MM)
    assert (head.rows, head.cols) == (HIDDEN, 50257) and head.flags & Flag.REDUCE_MAX
    assert p.config.layers == 24 and p.config.cores == 1
    assert list(p.tokens()) == list(range(127)) and p.runs_epilogue(63)
    assert not p.runs_epilogue(62)


def test_too_many_tokens_are_refused() -> None:
    plan = make_ring("gpt2-345m", "1xu280", "dfx", None)
    with pytest.raises(ArchipelagoError, match="exceed gpt2-345m's 1024 positions"):
        compile_plan(plan, 1000, 100)


def test_build_writes_every_file_and_refuses_an_existing_dir(tmp_path: Path) -> None:
    out = tmp_path / "dfx"
    run = ["build", "gpt2-345m", "--cluster", "4xu280", "--strategy", "dfx", "--out", str(out),
           "--json"]
    done = archi_here(*run)  # in this process: no interpreter start-up per run
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    names = {f"core{i}.{ext}" for i in range(4) for ext in ("asm", "bin")}
    names |= {"memory_map.json", "system_config.json", "summary.json"}
    assert {p.name for p in out.iterdir()} == names == set(summary["files"])
    config = json.loads((out / "system_config.json").read_text())
    for rank in range(4):
        sections = parse_listing((out / f"core{rank}.asm").read_text())
        words = from_bytes((out / f"core{rank}.bin").read_bytes())
        assert words == [i for name in ("prologue", "layer", "epilogue") for i in sections[name]]
        core = config["cores"][rank]
        assert (core["core_id"], core["cores"], core["layers"]) == (rank, 4, 24)
        assert core["sections"]["layer"]["words"] == len(sections["layer"])
    again = archi_here(*run)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"error: --out {out.resolve()} is not empty; pass --force to overwrite the files of "
        "a previous build"]
