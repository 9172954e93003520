"""Expert-parallel MoE placement: the combine's bytes and time by hand, each board's memory by
hand, the planner's choice against both placements costed, and `ep` refusals."""

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.models.spec import MoE
from archipelago.strategies.tensor_parallel.engines.router import DFX_SYNC_OVERHEAD_S
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.page import _link_bytes_per_token
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan
from archipelago.strategies.tensor_parallel.planning.experts import expected_busiest
from archipelago.strategies.tensor_parallel.staged import Stage

HIDDEN, EXPERTS, TOP_K, BOARDS = 64, 8, 2, 4
# U280 ring link (catalog): 300 ns, 100 Gb/s of 64b/66b; DFX's kernel clock 200 MHz
# (seeds/001 §VI).
LINK_S, LINK_BPS, DFX_CYCLE_S = 300e-9, 100e9 / 8 * 64 / 66, 1 / 200e6
# LORA's Aurora: 4 lanes x 12.8 Gb/s of 64b/66b, a 256-bit port (seeds/002 §V-B, §VI-C).
LORA_BPS, LORA_WORD = 4 * 12.8e9 * 64 / 66 / 8, 32
WORK = Generation(input_tokens=8, output_tokens=8)
TOKENS = {"tokens": "8:8"}  # WORK, as the planner that chooses the placement reads it


def _config(tmp_path: Path, experts: int = EXPERTS, top_k: int = TOP_K, ffn: int = 32,
            hidden: int = HIDDEN, layers: int = 2, shared: int = 0) -> str:
    fields = {"model_type": "qwen2_moe" if shared else "mixtral", "hidden_size": hidden,
              "num_hidden_layers": layers, "num_attention_heads": 4,
              "num_key_value_heads": 4, "vocab_size": 128, "max_position_embeddings": 512,
              "hidden_act": "silu", "tie_word_embeddings": False, "sliding_window": None}
    if shared:
        fields.update(num_experts=experts, moe_intermediate_size=ffn, intermediate_size=ffn,
                      shared_expert_intermediate_size=shared, num_experts_per_tok=top_k,
                      decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False)
    else:
        fields.update(num_local_experts=experts, num_experts_per_tok=top_k,
                      intermediate_size=ffn)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    return str(path)


def _ring(model: str, strategy: str, ep: int, cluster: str = "4xu280") -> Plan:
    plan = make_plan(model, cluster, strategy, {"split": f"tp={BOARDS},pp=1,ep={ep}"})
    assert plan.split.ep == plan.stages[0].ep == ep
    return plan.program


def _on_links(ring: Plan) -> float:
    """Bytes each ring link carries per token when `ring` runs every layer."""
    return _link_bytes_per_token(Stage(0, range(ring.spec.layers), tuple(range(BOARDS)), ring))


def _combine(ring: Plan) -> CommStep:
    (step,) = [s for s in ring.block_steps if isinstance(s, CommStep) and s.kind == "all_to_all"]
    return step


# ---- the combine by hand: 8 experts, top-2, 4 boards, hidden 64 --------------------------
def test_combine_replaces_the_sharded_ffn_syncs(tmp_path: Path) -> None:
    model = _config(tmp_path)
    for strategy in ("dfx", "lora-q"):
        sharded, whole = _ring(model, strategy, 1), _ring(model, strategy, BOARDS)
        ffn_syncs = {s.tensor for s in sharded.comm_steps()} - {s.tensor for s in
                                                                 whole.comm_steps()}
        assert "ffn_act" in ffn_syncs  # no gather of the experts' activations
        step = _combine(whole)
        # two boards at most send (top-2), each its whole hidden vector
        assert (step.width, step.senders) == (HIDDEN, TOP_K)


def test_combine_link_bytes_by_hand(tmp_path: Path) -> None:
    """Each of the 2 senders' 64 values crosses 3 of the 4 links: per link, 2 x 3/4 x 64
    values a layer (fp16 on DFX, int8 activations on LORA-Q)."""
    model = _config(tmp_path)
    for strategy, value_bytes in (("dfx", 2), ("lora-q", 1)):
        ring = _ring(model, strategy, BOARDS)
        without = [s for s in ring.block_steps if not (isinstance(s, CommStep)
                                                       and s.kind == "all_to_all")]
        extra = _on_links(ring) - _on_links(replace(ring, block_steps=without))
        assert extra == pytest.approx(2 * 2 * 3 / 4 * 64 * value_bytes)  # 2 layers


def test_combine_seconds_by_hand(tmp_path: Path) -> None:
    model = _config(tmp_path)
    # DFX: each sender's 64 x 16 bits is one 1024-bit beat; a hop is the TX fill and the
    # reorder write (a cycle each), two clock crossings of 2 cycles, the link latency and
    # the beat on the wire (128 B at 12.12 GB/s, slower than a cycle); 3 hops, one sync.
    ring = _ring(model, "dfx", BOARDS)
    beat_s = max(128 / LINK_BPS, DFX_CYCLE_S)
    hop = 2 * DFX_CYCLE_S + 4 * DFX_CYCLE_S + LINK_S + beat_s
    assert ring.engine.collective_seconds(_combine(ring), 1, ring.cluster) == pytest.approx(
        3 * hop + DFX_SYNC_OVERHEAD_S)
    # LORA: senders 0 and 1 send 16-value slices (16 B, one 32-B word) the short way:
    # 0->1, 0->2 (a tie: clockwise), 1->2, 1->3 and 0->2 share link 1->2: 3 words on it;
    # the farthest board is 2 hops away.
    ring = _ring(model, "lora-q", BOARDS)
    assert ring.engine.collective_seconds(_combine(ring), 1, ring.cluster) == pytest.approx(
        2 * LINK_S + 3 * LORA_WORD / LORA_BPS)


def test_expected_busiest_by_brute_force() -> None:
    """Every top-2 pick of 8 experts, 2 a board: the busiest board runs 2 in 4 of the 28
    picks, so 8/7 on average; the plan costs the worst case, 2."""
    for experts, k, ep in ((8, 2, 4), (6, 2, 4), (8, 3, 2), (5, 4, 3)):
        moe = MoE(experts=experts, per_token=k, expert_ffn=8)
        sizes = [experts // ep + (r < experts % ep) for r in range(ep)]
        owner = [r for r, n in enumerate(sizes) for _ in range(n)]
        picks = list(itertools.combinations(range(experts), k))
        mean = sum(max(sum(owner[e] == r for e in pick) for r in range(ep))
                   for pick in picks) / len(picks)
        assert expected_busiest(moe, ep) == pytest.approx(mean)
    assert expected_busiest(MoE(experts=8, per_token=2, expert_ffn=8), 4) == pytest.approx(8 / 7)


# ---- memory per board by hand -------------------------------------------------------------
@pytest.mark.parametrize("experts", [8, 6])
def test_memory_per_board_by_hand(tmp_path: Path, experts: int) -> None:
    """Whole experts: board r holds its experts' 3 x 64 x 32 weights whole instead of a
    quarter of every expert's columns; the 64 x E router is whole on every board in both."""
    model, ffn = _config(tmp_path, experts=experts), 32
    sharded, whole = _ring(model, "dfx", 1), _ring(model, "dfx", BOARDS)
    spec, bpp = whole.spec, whole.bytes_per_param
    per_board = [2, 2, 1, 1] if experts == 6 else [2, 2, 2, 2]
    for r, owned in enumerate(per_board):
        base = sharded.devices[r].held_bytes(spec, bpp, "hbm")
        held = whole.devices[r].held_bytes(spec, bpp, "hbm")
        experts_sharded = experts * 3 * HIDDEN * ffn // BOARDS
        assert held == base + 2 * bpp * (owned * 3 * HIDDEN * ffn - experts_sharded)


def test_shared_experts_are_whole_on_every_board(tmp_path: Path) -> None:
    model = _config(tmp_path, experts=8, top_k=2, ffn=16, shared=32)
    whole = _ring(model, "dfx", BOARDS)
    for dp in whole.devices:
        for role in ("shared_gate.weight", "shared_up.weight", "shared_down.weight"):
            assert dp.layer_shards[role].axis is None


# ---- the planner's choice ------------------------------------------------------------------
def _latency(model: str, strategy: str, split: str) -> tuple[float, int]:
    plan = make_plan(model, "4xu280", strategy, {"split": split}, TOKENS)
    return estimate(plan, WORK).latency_s, plan.split.ep


def test_planner_keeps_whole_experts_when_the_syncs_dominate(tmp_path: Path) -> None:
    """Tiny experts on DFX: the sharded FFN's two exposed syncs cost more than one board
    running a token's experts whole."""
    model = _config(tmp_path, top_k=1)
    sharded, _ = _latency(model, "dfx", "tp=4,pp=1,ep=1")
    whole, _ = _latency(model, "dfx", "tp=4,pp=1,ep=4")
    assert whole < sharded
    assert _latency(model, "dfx", "tp=4,pp=1") == (whole, BOARDS)


def test_planner_keeps_sharded_experts_when_the_weights_dominate(tmp_path: Path) -> None:
    """Wide experts: one board streaming a token's two experts whole is slower than four
    boards streaming a quarter each."""
    model = _config(tmp_path, ffn=1024, hidden=1024)
    sharded, _ = _latency(model, "lora-q", "tp=4,pp=1,ep=1")
    whole, _ = _latency(model, "lora-q", "tp=4,pp=1,ep=4")
    assert sharded < whole
    assert _latency(model, "lora-q", "tp=4,pp=1") == (sharded, 1)


# ---- refusals -------------------------------------------------------------------------------
@pytest.mark.parametrize(("experts", "split", "message"), [
    (8, "tp=4,pp=1,ep=3", r"ep=3: ep is 1 \(each expert's columns split over the tp=4 "
                          r"boards\) or 4 \(whole experts on each board\); valid ep: 1, 4"),
    (8, "tp=4,pp=1,ep=0", "--split ep='0': must be a whole number >= 1"),
    (2, "tp=4,pp=1,ep=4", "ep=4: 2 experts cannot give each of the tp=4 boards a whole "
                          "one; valid ep: 1"),
])
def test_bad_ep_refused_in_one_line(tmp_path: Path, experts: int, split: str,
                                    message: str) -> None:
    model = _config(tmp_path, experts=experts, top_k=1)
    with pytest.raises(ArchipelagoError, match=message) as err:
        make_plan(model, "4xu280", "dfx", {"split": split})
    assert "\n" not in str(err.value)


def test_emulator_refuses_whole_experts_in_one_line(tmp_path: Path) -> None:
    from archipelago.emulate.errors import EmulationError
    from archipelago.strategies.tensor_parallel.emulate.rank import check

    ring = _ring(_config(tmp_path), "dfx", BOARDS)
    with pytest.raises(EmulationError, match="no emulator handler: all_to_all") as err:
        check(ring, None)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)
