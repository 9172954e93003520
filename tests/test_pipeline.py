"""Tensor x pipeline plans: clusters of rings, the split, its balance, its cost, its refusals."""

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from archipelago.api import make_plan, parse_workload, plan_and_estimate
from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import get_kind
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.planning.rings import one_ring
from archipelago.strategies.tensor_parallel.planning.stages import (
    Split,
    balanced_layers,
    parse_split,
    stage_seconds,
)
from archipelago.strategies.tensor_parallel.report import summarize
from archipelago.strategies.tensor_parallel.split_choice import Candidate
from tests.cli_here import archi_here

LLAMA_70B = str(Path(__file__).parent / "data" / "llama-2-70b" / "config.json")
U280_HBM = 8 * 2**30  # catalog: 8 GiB of HBM2 (seeds/002 §V-A)
# The 100G switch port between rings (machines.py): 85 ns one way, 100 Gb/s.
SWITCH_LATENCY_S, SWITCH_BPS = 85e-9, 100e9 / 8


# ---- clusters of rings ----------------------------------------------------------------------
def test_rings_shorthand_groups_boards_and_joins_them_by_a_switch_port() -> None:
    cluster = resolve_cluster("8x4xu280")
    assert (cluster.size, cluster.rings, cluster.ring_size) == (32, 8, 4)
    assert cluster.topology == "ring"
    assert cluster.inter_ring_link is not None
    assert cluster.inter_ring_link.latency_s == SWITCH_LATENCY_S
    assert cluster.inter_ring_link.bandwidth_Bps == SWITCH_BPS
    assert cluster.link(3, 4) == cluster.inter_ring_link  # ring 0 to ring 1
    assert cluster.link(2, 3) == cluster.ring_link  # inside ring 0: Aurora
    assert cluster.group(4, 4).size == 4 and cluster.group(4, 4).rings == 1
    with pytest.raises(ValueError, match="not inside one ring"):
        cluster.group(2, 4)


def test_one_ring_cluster_is_what_it_was() -> None:
    cluster = resolve_cluster("4xu280")
    assert cluster.rings == 1 and cluster.inter_ring_link is None
    assert "rings" not in cluster.model_dump()  # a stored study's digest is unchanged
    plan = make_plan("gpt2-345m", "4xu280", "dfx")
    assert len(plan.stages) == 1 and plan.chosen == "cluster" and not plan.shows_split
    assert plan.stages[0].nodes == (0, 1, 2, 3) and plan.program.cluster is plan.cluster


@pytest.mark.parametrize(("text", "message"), [
    ("0x4xu280", "ring count 0 is out of range 1..4096"),
    ("4x0xu280", "device count 0 is out of range 1..4096"),
    ("2048x4xu280", "2048 x 4 devices exceed the limit of 4096"),
    ("2x4xfoo", "unknown device 'foo'"),
])
def test_rings_shorthand_refusals(text: str, message: str) -> None:
    with pytest.raises(ArchipelagoError, match=message):
        resolve_cluster(text)


def test_cluster_file_says_rings_with_any_link(tmp_path: Path) -> None:
    path = tmp_path / "rack.yaml"
    path.write_text("nodes: [{device: u280, count: 8}]\nrings: 2\n"
                    "inter_ring_link: {latency_ns: 500, bandwidth_gbps: 200}\n")
    cluster = resolve_cluster(str(path))
    assert (cluster.rings, cluster.ring_size) == (2, 4)
    assert cluster.inter_ring_link == cluster.link(3, 4)
    assert cluster.link(3, 4).bandwidth_Bps == 200e9 / 8
    path.write_text("nodes: [{device: u280, count: 7}]\nrings: 2\n")
    with pytest.raises(ArchipelagoError, match="field 'rings': 7 nodes do not form 2 equal"):
        resolve_cluster(str(path))


# ---- the split option -------------------------------------------------------------------------
def test_split_text() -> None:
    assert parse_split(None) is None and parse_split(" ") is None
    assert parse_split("auto") == "auto"
    assert parse_split("pp=2, tp=4") == Split(4, 2)
    assert parse_split("tp=1,pp=3,layers=2+3+1") == Split(1, 3, (2, 3, 1))


@pytest.mark.parametrize(("split", "message"), [
    ("tp=x,pp=2", r"--split tp='x': must be a whole number >= 1; --split takes auto or"),
    ("tp=0,pp=2", r"--split tp='0': must be a whole number"),
    ("tp=4", "give both tp= and pp="),
    ("tp=4,pp=2,ex=2", "'ex=2' is not one of tp=, pp=, layers=, ep="),
    ("tp=4,pp=2,ep=2", "ep=2: llama-2-70b has no mixture of experts; valid ep: 1"),
    ("tp=4,tp=2,pp=1", "tp given twice"),
    ("tp=4,pp=2,layers=40", "1 stage\\(s\\) for pp=2; give one count per stage"),
    ("tp=3,pp=2", "a stage's boards sit in one ring of 4 on '8x4xu280'; valid tp: 1, 2, 4"),
    ("tp=4,pp=9", "32 devices at tp=4 and 80 layers allow pp 1..8"),
    ("tp=4,pp=2,layers=40+39", "the stages hold 79 layers; llama-2-70b has 80"),
])
def test_given_split_refused_in_one_line(split: str, message: str) -> None:
    with pytest.raises(ArchipelagoError, match=message) as err:
        plan_and_estimate(LLAMA_70B, "8x4xu280", "lora-q", {"tokens": "8:8", "split": split})
    assert "\n" not in str(err.value)


def test_split_is_refused_where_it_does_not_apply() -> None:
    with pytest.raises(ArchipelagoError, match="--split"):
        parse_workload("dfx", {"split": "auto"}, "explore")


# ---- balancing --------------------------------------------------------------------------------
def _brute_bottleneck(layers: int, stages: int, times: tuple[float, float, float]) -> float:
    """The slowest stage of the best of all C(layers - 1, stages - 1) boundary choices."""
    best = float("inf")
    for cuts in itertools.combinations(range(1, layers), stages - 1):
        counts = tuple(b - a for a, b in zip((0, *cuts), (*cuts, layers), strict=True))
        best = min(best, max(stage_seconds(counts, *times)))
    return best


@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_balanced_boundaries_match_brute_force(strategy: str) -> None:
    """gpt2-345m's own part times (24 layers; the LM head outweighs a layer several times)."""
    plan = make_plan("gpt2-345m", "2xu280", strategy)
    part = Candidate(plan.program, 2, 1, plan.cluster, Generation(32, 16))
    times = (part.block_s, part.embed_s, part.output_s)
    for stages in (2, 3, 5):
        counts = balanced_layers(24, stages, *times)
        assert len(counts) == stages and sum(counts) == 24 and min(counts) >= 1
        assert max(stage_seconds(counts, *times)) == pytest.approx(
            _brute_bottleneck(24, stages, times), rel=1e-12)


@pytest.mark.parametrize(("layers", "stages", "times"), [
    (7, 3, (1.0, 0.0, 0.0)), (9, 4, (1.0, 2.5, 0.3)), (10, 3, (0.7, 0.0, 6.0)),
    (6, 6, (1.0, 9.0, 9.0)), (12, 5, (2.0, 20.0, 1.0)),
])
def test_balanced_boundaries_small_cases(layers: int, stages: int,
                                         times: tuple[float, float, float]) -> None:
    counts = balanced_layers(layers, stages, *times)
    assert sum(counts) == layers and min(counts) >= 1
    assert max(stage_seconds(counts, *times)) == pytest.approx(
        _brute_bottleneck(layers, stages, times), rel=1e-12)


# ---- the cost of a two-stage pipeline, by hand --------------------------------------------------
@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_two_stage_latency_by_hand(strategy: str) -> None:
    """gpt2-345m on two rings of two U280s, 12 + 12 layers. Every stage time comes from the
    single-ring estimator of the same model cut to 12 layers (E + 12 B + O) and whole (E +
    24 B + O); the transfers are written out: the hidden vector (1,024 FP16 values) crosses
    the switch port once per row, the sampled token (4 bytes) returns once per decode step.
    """
    n_in, n_out = 8, 4
    work = Generation(n_in, n_out)
    spec = resolve_model("gpt2-345m")
    ring = make_plan(spec.name, "2xu280", strategy)
    whole = estimate(ring, work)
    halved = spec.model_copy(update={"layers": 12})
    stage = replace(ring.stages[0], layers=range(12),
                    program=replace(ring.program, spec=halved))
    half = estimate(replace(ring, spec=halved, stages=[stage]), work)
    embed = half.breakdown_s["embedding"]
    block = (whole.latency_s - half.latency_s) / 12
    output = half.latency_s - embed - 12 * block

    result = plan_and_estimate(spec.name, "2x2xu280", strategy,
                               {"tokens": f"{n_in}:{n_out}", "split": "tp=2,pp=2,layers=12+12"})
    est = result.estimate
    assert result.plan.split == Split(2, 2, (12, 12), ep=1)
    assert result.plan.chosen == "given"
    first, second = est.stages
    assert first.stage.nodes == (0, 1) and second.stage.nodes == (2, 3)
    assert first.busy_s == pytest.approx(embed + 12 * block, rel=1e-9)
    assert second.busy_s == pytest.approx(12 * block + output, rel=1e-9)

    row = 1024 * 2  # hidden x FP16 bytes (LORA-F's all-gathers carry FP16 too)
    hop = SWITCH_LATENCY_S + row / SWITCH_BPS  # 85 ns + 163.84 ns
    token_back = SWITCH_LATENCY_S + 4 / SWITCH_BPS
    # DFX runs the prompt token by token (one hop per token); LORA as one pass (one hop)
    prompt = (n_in * hop if strategy == "dfx"
              else SWITCH_LATENCY_S + n_in * row / SWITCH_BPS)
    transfers = prompt + (n_out - 1) * (hop + token_back)
    assert est.transfer_s == pytest.approx(transfers, rel=1e-12)
    assert est.latency_s == pytest.approx(whole.latency_s + transfers, rel=1e-12)
    assert est.decode_s_per_token == pytest.approx(
        whole.decode_s_per_token + hop + token_back, rel=1e-12)


# ---- memory ---------------------------------------------------------------------------------
def test_memory_refusal_names_stage_rank_memory_and_shortfall() -> None:
    """Llama-2-70B in FP16 over 2 stages of 4: each device of stage 0 holds a quarter of 40
    layers' matrices (q, o: 8192^2; k, v: 8192 x 1024; gate, up, down: 8192 x 28672) and of
    their KV cache (2 x 1024 values x 2 bytes per token, 16 tokens)."""
    result = plan_and_estimate(LLAMA_70B, "2x4xu280", "dfx",
                               {"tokens": "8:8", "split": "tp=4,pp=2"})
    est = result.estimate
    matrices = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    need = (matrices * 40 * 2 + 2 * 1024 * 2 * 16 * 40) / 4
    assert not est.feasible
    assert est.reasons[:4] == [
        f"device {rank} (u280, stage 0, layers 0-39): HBM needs {need:.4g} bytes, "
        f"has {U280_HBM:.4g} ({need - U280_HBM:.3g} over)" for rank in range(4)]
    console = Console(record=True, width=200)
    summarize(*result).print(console)
    assert console.export_text().startswith("does not fit: device 0 (u280, stage 0")


def test_auto_split_takes_the_fewest_stages_that_fit() -> None:
    """At batch 1 more stages only add transfers: the planner keeps the fewest that fit."""
    plan, _, est = plan_and_estimate(LLAMA_70B, "16x4xu280", "dfx", {"tokens": "128:128"})
    assert est.feasible and plan.chosen == "auto"
    tp, pp = plan.split.tp, plan.split.pp
    fewer = plan_and_estimate(LLAMA_70B, "16x4xu280", "dfx",
                              {"tokens": "128:128", "split": f"tp={tp},pp={pp - 1}"}).estimate
    assert not fewer.feasible
    assert any("HBM needs" in r for r in fewer.reasons)


def test_plans_of_stages_are_refused_by_one_ring_hooks() -> None:
    """The design search and program builds run one ring (estimates, reports, pages and
    emulation walk the stages: test_rack_report.py, test_emulate_pipeline.py)."""
    plan = make_plan("gpt2-345m", "2x2xu280", "dfx", workload={"split": "tp=2,pp=2"})
    with pytest.raises(PartitionError, match="the design search runs one ring; '2x2xu280' "
                                             "plans"):
        one_ring(plan, "the design search")
    assert plan.split == Split(2, 2, (13, 11), 1) and plan.chosen == "given"  # balanced
    est = get_kind("tensor-parallel").hook("estimator")(plan, Generation(4, 4))
    assert len(est.stages) == plan.split.pp


def test_done_when_command() -> None:
    out = archi_here("plan", LLAMA_70B, "--cluster", "8x4xu280", "--strategy", "lora-q",
                     "--tokens", "128:128", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["parameters"] == 68_976_648_192  # Llama-2-70B as transformers counts it
    assert {"tp", "pp", "layers"} <= set(data["split"])
    assert sum(data["split"]["layers"]) == 80
    assert len(data["stages"]) == data["split"]["pp"]
    for key in ("latency_s", "tokens_per_s", "bandwidth_efficiency"):
        assert data[key] > 0
    assert {"hbm_bytes", "bram", "prefill_s", "decode_s_per_token"} <= set(data["stages"][0])
    # 70B in int8 over 32 U280s: no stage device is short of HBM
    assert all(s["hbm_bytes"] < U280_HBM for s in data["stages"])


@pytest.mark.parametrize("strategy", ["lora-q", "dfx"])
def test_one_stage_of_a_batch_costs_what_the_ring_costs(strategy: str) -> None:
    """A batch of 4 on one stage of a rack (tp=4, pp=1: no transfers) is the single-ring
    estimate of the same batch on one ring: sequences together on LORA, in turn on DFX."""
    work = {"tokens": "16:8", "batch": "4"}
    _, _, staged = plan_and_estimate("gpt2-345m", "2x4xu280", strategy,
                                     {**work, "split": "tp=4,pp=1"})
    ring = estimate(make_plan("gpt2-345m", "4xu280", strategy), Generation(16, 8, batch=4))
    assert staged.batch == ring.batch == 4 and staged.batch_note == ring.batch_note
    assert staged.latency_s == pytest.approx(ring.latency_s)
    assert staged.tokens_per_s == pytest.approx(ring.tokens_per_s)


def test_a_batch_moves_its_rows_between_stages() -> None:
    """Two stages at batch 3: each decode step sends 3 hidden rows over the switch port and
    3 tokens back; the transfers are 3 rows' bytes over the same hops as batch 1."""
    runs = {b: plan_and_estimate("gpt2-345m", "2x4xu280", "lora-q",
                                 {"tokens": "16:8", "batch": str(b), "split": "tp=4,pp=2"})[2]
            for b in (1, 3)}
    link = runs[1].links[0]
    row = 1024 * 1  # hidden values at LORA-Q's int8 activations
    step = {b: (link.latency_s + b * row / link.bandwidth_Bps)
            + (runs[1].links[1].latency_s + b * 4 / runs[1].links[1].bandwidth_Bps)
            for b in (1, 3)}
    prompt = {b: link.latency_s + 16 * b * row / link.bandwidth_Bps for b in (1, 3)}
    for b in (1, 3):
        assert runs[b].transfer_s == pytest.approx(prompt[b] + 7 * step[b])
