"""Emulation of host-offload plans (seeds/003): one process per card holding only its INT8
blocks, checked against an FP32 nn.LSTM NMT with the same weights."""

import pytest

from archipelago.emulate.errors import RankFailure
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.recurrent import build_recurrent
from archipelago.strategies.host_offload.emulate import STATE_TOLERANCE, emulate_host
from archipelago.strategies.host_offload.emulate.processes import start_cards
from archipelago.strategies.host_offload.plan import make_host_plan

STEPS = 6


def _emulate(name: str, cards: int, in_process: bool = False, **model) -> dict:
    spec = build_recurrent(name, 64, vocab=40, **model)
    plan = make_host_plan(spec, resolve_cluster(f"{cards}xs10-2800"), steps=STEPS)
    return emulate_host(plan, seed=0, in_process=in_process)


@pytest.mark.parametrize("name", ["nmt-luong", "nmt-li"])
def test_tiny_nmt_translates_like_the_reference_on_1_2_4_8_cards(name: str) -> None:
    reports = [_emulate(name, n, in_process=n != 4) for n in (1, 2, 4, 8)]
    for r in reports:
        assert r["trace_matches_plan"]
        assert r["tokens_match"], (r["tokens"], r["reference_tokens"])
        assert r["max_state_diff"] <= STATE_TOLERANCE and r["max_state_diff"] > 0  # INT8
        assert len(r["tokens"]) == STEPS
    # every card count computes the same int32 accumulators, so the same tokens
    assert len({r["integer_checksum"] for r in reports}) == 1
    assert len({tuple(r["tokens"]) for r in reports}) == 1
    assert reports[1]["beam"] == (5 if name == "nmt-li" else 1)
    # each card holds only its share of the INT8 weights
    one, eight = reports[0]["weight_bytes_per_card"], reports[3]["weight_bytes_per_card"]
    assert len(eight) == 8 and sum(eight) == one[0] and max(eight) < one[0] / 4


def test_lstm_stack_matches_torch_lstm() -> None:
    r = _emulate("lstm", 2, layers=2)
    assert r["trace_matches_plan"] and r["max_state_diff"] <= STATE_TOLERANCE


def test_a_failing_card_is_named() -> None:
    cards = start_cards(2, timeout_s=120.0)  # a bound on a stuck card: the failure is at once
    try:
        cards[1].send(("fpga_execute", "never-loaded", None))
        with pytest.raises(RankFailure, match="card 1 failed: KeyError"):
            cards[1].request(("fpga_get_out",))
        assert cards[0].request(("report",))["blocks"] == 0
    finally:
        for card in cards:
            card.close()


def test_bidirectional_lstm_stack_matches_torch_on_3_cards() -> None:
    from archipelago.models.recurrent import LSTMSpec

    spec = LSTMSpec(name="bi", hidden=30, input_size=16, layers=2, bidirectional_layers=1)
    plan = make_host_plan(spec, resolve_cluster("3xs10-2800"), steps=5)
    r = emulate_host(plan, seed=3, in_process=True)
    assert r["trace_matches_plan"] and 0 < r["max_state_diff"] <= STATE_TOLERANCE
