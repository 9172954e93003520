"""Galapagos's design space bounded by the board: the shortest row interval whose kernels fit
one FPGA, worked out by hand from the kernel rules (seeds/000 §7.1, hls_stream.py, aie.py)
and the catalog's U280, V80 and VCK190 figures; the search over it on a large cluster."""

from archipelago.estimate.workload import Sequence
from archipelago.explore.search import SearchRequest, run_search
from archipelago.explore.spaces import design_space
from archipelago.hardware.catalog import catalog
from archipelago.strategies.galapagos.kernel_design import KernelDesign, KernelJob
from archipelago.strategies.galapagos.space import engine_for

PUBLISHED_HLS = 768  # H cycles a row (seeds/000 Table 1: I -> 767)
SLOWER = (1536, 3072)  # the published interval doubled twice


def _q_slice(device: str, ii: int) -> KernelDesign:
    """The narrowest slice of the Q Linear, one head (K = 768, N = 64, its Quant fused), as
    the engine sizes it for `ii` cycles a row."""
    job = KernelJob("linear", 768, 64, (768,), 64, ("quant8",))
    return engine_for(catalog()[device]).design(job, ii)


def test_u280_interval_bound_by_hand() -> None:
    """One Q head (K 768 x N 64) at ii cycles a row: tiles from ceil(64/ii), PEs
    ceil(768 / (ii // ceil(64/tiles))), DSPs ceil(tiles/2) x PEs (two int8 products a
    DSP48E2) plus 4 a tile for its Quant (a 32 x 32 multiply: 2 x 2 DSP48E2).
    ii = 3: 22 tiles of 3 columns, 768 PEs: 11 x 768 + 88 = 8,536 DSPs, and BRAM 22 tiles x
    ceil(6,144/72) = 86 + bias 1 + FIFOs 8 x 3 (12 flits x 128 rows) + 8 = 1,925: over 90%
    of the U280's 9,024 DSPs (8,121.6) and 2,016 BRAMs (1,814.4). ii = 6: 11 tiles of 6,
    768 PEs: 6 x 768 + 44 = 4,652 DSPs. So 6 is the shortest interval (halving 768)."""
    at3, at6 = _q_slice("u280", 3), _q_slice("u280", 6)
    assert (at3.tiles, at3.pes, at3.resources.dsp, at3.resources.bram) == (22, 768, 8536, 1925)
    assert (at6.tiles, at6.pes, at6.resources.dsp) == (11, 768, 4652)
    genes = design_space("galapagos", "ibert-base", "72xu280", Sequence(128)).genes
    assert genes["row_interval"] == (6, 12, 24, 48, 96, 192, 384, PUBLISHED_HLS, *SLOWER)


def test_v80_interval_bound_by_hand() -> None:
    """The V80's 10,848 DSPs (9,763.2 under the cap) and 3,741 BRAMs (3,366.9) take the Q
    head at ii = 3 (8,536 DSPs, 1,925 BRAMs, above); ii = ceil(768/512) = 2: 32 tiles of 2
    columns, 768 PEs: 16 x 768 + 128 = 12,416 DSPs, over. The engine's packing is the
    DSP48E2's two int8 products (seeds/000's build), counted the same on the DSP58."""
    at2 = _q_slice("v80", 2)
    assert (at2.tiles, at2.pes, at2.resources.dsp) == (32, 768, 12416)
    genes = design_space("galapagos", "ibert-base", "8xv80", Sequence(128)).genes
    assert genes["row_interval"] == (3, 6, 12, 24, 48, 96, 192, 384, PUBLISHED_HLS,
                                     *SLOWER)


def test_versal_interval_starts_from_the_ai_engine_time_by_hand() -> None:
    """VCK190 (400 AIEs, 1,968 DSP58): the published interval is the Q/K/V AIEs' time a row,
    768 x 32 columns / 64 MACs = 384 AIE cycles at 1 GHz = 76.8 -> 77 PL cycles at 200 MHz
    (seeds/000 §9.3). The attention kernel (all 12 heads, 24 AIEs) keeps its Softmax and
    Quant lanes in the PL: at ii = 20, ceil(3 x 12 x 128 / 20) = 231 Softmax lanes x 9 DSPs
    (16x16: 1, 32x32: 4, requant 4) + ceil(12 x 64 / 20) = 39 Quant lanes x 4 = 2,235 DSPs,
    over 90% of 1,968 (1,771.2); at ii = 39: 119 x 9 + 20 x 4 = 1,151, within."""
    genes = design_space("galapagos", "ibert-base", "12xvck190", Sequence(128)).genes
    assert genes["row_interval"] == (39, 77, 154, 308)


def test_the_published_point_decodes_to_the_default_engine() -> None:
    space = design_space("galapagos", "ibert-base", "72xsidewinder", Sequence(128))
    assert space.baseline == {"row_interval": PUBLISHED_HLS}
    assert space.decode(dict(space.baseline)) == {"row_interval": None}
    assert space.decode({"row_interval": 384}) == {"row_interval": 384}


def test_search_finds_a_faster_build_where_the_cluster_has_the_fpgas() -> None:
    """seeds/000 §8.2 gives each encoder six Sidewinders at the published interval, so 72 of
    them hold the twelve encoders and no faster build; 72 U280s (4.6x the DSPs each) hold a
    build of a shorter interval, whose pipeline then runs faster."""
    def best(cluster: str):
        return run_search(SearchRequest("ibert-base", cluster, "galapagos", Sequence(128),
                                        20, "", "x"))

    sidewinders, u280s = best("72xsidewinder"), best("72xu280")
    assert sidewinders.engine == {"row_interval": None} and sidewinders.exhausted
    assert u280s.engine["row_interval"] is not None
    assert u280s.engine["row_interval"] < PUBLISHED_HLS
    assert u280s.latency_s < sidewinders.latency_s
    assert max(u280s.utilization.values()) <= 1
