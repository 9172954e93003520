"""The galapagos strategy: I-BERT unrolled into kernels, packed onto FPGAs, grouped into
clusters with GMI kernels, against the paper's build (seeds/000 §7.2, Fig. 14) and hand
counts."""

from itertools import pairwise
from typing import get_args

import pytest

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.strategies.galapagos.aie import AIEEngine
from archipelago.strategies.galapagos.gmi import HOST, gateway_name
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine
from archipelago.strategies.galapagos.kernel_design import KernelJob, OpKind, multiplier_dsp


def test_one_port_fpgas_hang_off_chained_switches() -> None:
    """§8.1/Fig. 17: Sidewinders on 100G switches, 85 ns one way through a switch (half of
    §9.4's 0.17 us round trip), d = 1.1 us from switch to switch (§8.2.2)."""
    cluster = resolve_cluster("72xsidewinder")
    assert cluster.size == 72 and cluster.topology == "switch"
    assert cluster.link(0, 1).latency_s == pytest.approx(85e-9)
    assert cluster.link(0, 1).bandwidth_Bps == pytest.approx(12.5e9)
    assert cluster.switch_latency_s == pytest.approx(1.1e-6)
    assert resolve_cluster("4xu280").topology == "ring"


@pytest.fixture(scope="module")
def paper_build():
    return make_plan("ibert-base", "72xsidewinder", "galapagos")


def test_one_encoder_per_cluster_with_the_papers_kernel_ids(paper_build) -> None:
    """Fig. 14: kernels 0..38 per encoder; 32 compute kernels (Q, K, V, 12 dot-product +
    softmax, 12 softmax-matmul, attention Linear, LayerNorm, two FFN Linears, LayerNorm),
    gateway 0, GMI scatters/gather/broadcast, the gateway's broadcast as a virtual kernel."""
    plan = paper_build
    assert len(plan.clusters) == 12 and plan.fpgas_needed == 72
    for c in plan.clusters:
        members = [n for n in plan.nodes.values() if n.cluster == c.index]
        assert sorted(n.kernel_id for n in members) == list(range(39))
        roles = [n.role for n in sorted(members, key=lambda n: n.kernel_id)]
        assert roles == ["gateway"] + ["compute"] * 32 + ["gmi"] * 5 + ["virtual"]
        assert len(c.fpgas) == 6 and c.layers == (c.index,)
    assert plan.nodes[gateway_name(3)].kernel_id == 0
    kinds = sorted(n.collective for n in plan.nodes.values()
                   if n.cluster == 0 and n.role in {"gmi", "virtual"})
    assert kinds == ["broadcast", "broadcast", "gather", "scatter", "scatter", "scatter"]


def test_every_fpga_fits_its_device_and_belongs_to_one_cluster(paper_build) -> None:
    plan = paper_build
    seen = set()
    for c in plan.clusters:
        assert not seen & set(c.fpgas)
        seen |= set(c.fpgas)
    assert seen == set(range(72))
    for use in plan.fpgas:
        have = use.device.resources
        assert use.resources.dsp <= have.dsp and use.resources.bram <= have.bram
        assert use.resources.uram <= have.uram
        assert {plan.nodes[k].cluster for k in use.kernels} == {use.cluster}


def test_linear_kernels_by_hand() -> None:
    """Q: 768 x 768 at 768 cycles per row needs 768 int8 MACs per cycle; two tiles share
    each DSP (WP486), so 2 tiles x 384 PEs = 384 DSPs plus two 32 x 32 requantizers."""
    engine = HLSStreamEngine()
    q = engine.design(KernelJob("linear", 768, 768, (768,), 768, ("quant8",)), 768)
    assert (q.tiles, q.pes) == (2, 384)
    assert engine.compute_cycles(q, 128) == (768 // 2) * (768 // 384) == 768
    assert q.resources.dsp == 384 + 2 * multiplier_dsp(32, 32) == 392
    ffn = engine.design(KernelJob("linear", 768, 3072, (768,), 3072, ("gelu",)), 768)
    assert ffn.tiles * ffn.pes / 2 == 768 * 3072 / 768 / 2  # 1,536 DSPs of MACs


@pytest.mark.parametrize("engine", [HLSStreamEngine, AIEEngine])
def test_every_kernel_op_has_rules(engine) -> None:
    """Each engine's handler table covers exactly the ops a kernel job can name."""
    assert set(engine.kernels) == set(get_args(OpKind))


def test_a_matrix_fifo_takes_about_43_bram18() -> None:
    """§8.2.1: a FIFO holding a 128 x 768 int8 matrix needs about 43 18Kb BRAMs."""
    engine = HLSStreamEngine()
    fifo = engine.design(KernelJob("gmi", 0, 0, (768,), 0, flits_per_row=12), 768)
    bram18 = 2 * fifo.resources.bram
    assert 128 * 768 * 8 / (18 * 1024) <= bram18 <= 1.15 * 43


def test_fewer_fpgas_than_needed_is_infeasible_and_says_how_many() -> None:
    from archipelago.strategies.galapagos.estimate import estimate_stream

    plan = make_plan("ibert-base", "36xsidewinder", "galapagos")
    est = estimate_stream(plan, 128)
    assert not est.feasible
    assert f"needs {plan.fpgas_needed} sidewinder FPGAs; the cluster has 36" in est.reasons[0]
    assert 36 < plan.fpgas_needed <= 72


def test_split_linears_cover_their_weights_and_reduce_the_partial_sums() -> None:
    """A low cap forces splits: Q/K/V by heads, FFN-up by column, FFN-down by the matching
    rows, whose partial sums a GMI reduce adds before LayerNorm takes the residual."""
    plan = make_plan("ibert-base", "300xsidewinder", "galapagos", {"utilization": 0.15})
    layer = [k for k in plan.compute.values() if k.layer == 0]
    for role, total in (("q", 768), ("ffn_up", 3072), ("ffn_down", 3072)):
        parts = sorted((k.lo, k.hi) for k in layer if k.role == role)
        assert len(parts) > 1 and parts[0][0] == 0 and parts[-1][1] == total
        assert all(a[1] == b[0] for a, b in pairwise(parts))
    assert all(k.lo % 64 == 0 for k in layer if k.role == "q")  # whole heads per part
    assert plan.nodes["L0.ffn_down.reduce"].collective == "reduce"
    ln2 = plan.compute["L0.ln2"]
    assert ln2.residual and not any(k.residual for k in layer if k.role == "ffn_down")


def test_every_head_gets_q_k_v_and_the_chain_reaches_the_host(paper_build) -> None:
    plan = paper_build
    into: dict[str, list[str]] = {}
    for s in plan.streams:
        into.setdefault(s.dst, []).append(s.src)
    for h in range(12):
        assert sorted(into[f"L0.score.h{h}"]) == ["L0.k.heads.scatter", "L0.q.heads.scatter"]
        assert sorted(into[f"L0.context.h{h}"]) == [f"L0.score.h{h}", "L0.v.heads.scatter"]
    assert into[HOST] == ["L11.ln2"]
    assert into["L5.input.broadcast"] == ["L4.ln2"]
    assert all(s.inter_cluster for s in plan.streams if s.dst == "L5.input.broadcast")


@pytest.mark.parametrize(("model", "cluster", "message"), [
    ("gpt2-345m", "72xsidewinder", "builds encoders"),
    ("ibert-base", "4xa100", "without DSPs"),
])
def test_wrong_model_or_device_is_refused(model: str, cluster: str, message: str) -> None:
    with pytest.raises(PartitionError, match=message):
        make_plan(model, cluster, "galapagos")


def test_unknown_engine_parameter_names_the_valid_ones() -> None:
    with pytest.raises(ArchipelagoError, match=r"unknown galapagos engine parameter.*row_interval"):
        make_plan("ibert-base", "72xsidewinder", "galapagos", {"tiles": 3})
