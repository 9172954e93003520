"""Collective costs on small cases computed by hand."""

import pytest

from archipelago.comm.collectives import (
    all_gather_s,
    ring_all_gather_s,
    ring_all_reduce_s,
    switch_all_gather_s,
)
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.device import Link

LINK = Link(latency_s=1e-6, bandwidth_Bps=1e9)


def test_ring_all_gather_by_hand() -> None:
    # 4 ranks, 4000 bytes in all: 3 steps of (1 us + 1000 B / 1 GB/s = 1 us) = 6 us.
    assert ring_all_gather_s(4000, 4, LINK) == pytest.approx(6e-6)
    assert ring_all_gather_s(4000, 1, LINK) == 0


def test_ring_all_reduce_is_reduce_scatter_plus_all_gather() -> None:
    assert ring_all_reduce_s(4000, 4, LINK) == pytest.approx(12e-6)


def test_switch_all_gather_by_hand() -> None:
    # one hop latency + switch + 3 parts of 1000 B serialized on one port.
    assert switch_all_gather_s(4000, 4, LINK, 0.5e-6) == pytest.approx(1e-6 + 0.5e-6 + 3e-6)


def test_u280_ring_all_gather_of_a_gpt2_vector() -> None:
    # 1024 FP16 values over 4 U280s: 3 x (300 ns + 512 B / 12.12 GB/s).
    beta = 100e9 * 64 / 66 / 8
    expected = 3 * (300e-9 + 512 / beta)
    assert all_gather_s(2048, resolve_cluster("4xu280")) == pytest.approx(expected)
