"""Every strategy over the built-in models and today's configs (dense, grouped-query,
mixture of experts, latent attention: transformers' default configs) on 1 to 64 devices:
no figure below its physical floors (issue 32 point 4). Each estimate goes through the
pipeline, which would refuse one below a floor, and its floors are asserted here too."""

import json
from pathlib import Path

import pytest

from archipelago import api
from archipelago.errors import ArchipelagoError
from archipelago.estimate.floors import BelowFloor
from archipelago.strategies.registry import strategies

transformers = pytest.importorskip("transformers")

# dense (llama), grouped-query (mistral, qwen2), experts (mixtral, qwen2_moe), latent
# attention with dense and MoE layers (deepseek_v3)
CONFIGS = ("llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "deepseek_v3")
ZOO = ("gpt2-345m", "gpt2-1.5b", "llama2-7b", "opt-6.7b", "bert-base", "ibert-base")
COUNTS = (1, 2, 4, 8, 16, 32, 64)
# The clusters each kind's strategies take: rings of HBM boards and racks of them, GPUs.
CLUSTERS = {
    "tensor-parallel": [f"{n}x{d}" for d in ("u280", "v80") for n in COUNTS]
    + ["2x4xu280", "16x4xu280", "8x8xv80"],
    "gpu": [f"{n}x{d}" for d in ("h200", "a100") for n in COUNTS],
    "dataflow": ["72xsidewinder", "8xsidewinder", "4xvck190", "4xu280"],
    "scheduled-dag": ["hacc", "chef-cluster1", "chef-cluster2", "chef-cluster3"],
    "host-program": ["1xs10-2800", "8xs10-2800", "8xa10-1150"],
}
# Each kind's workloads: batch 1, 8 and 64 of a text generation; one encoder length; the
# DAGs none; host programs each place of the weights (on chip, streamed from the host or
# from the card's DDR4).
WORKLOADS = {"tensor-parallel": [{"tokens": "64:64"}, {"tokens": "64:64", "batch": "8"}],
             "gpu": [{"tokens": "64:64"}, {"tokens": "64:64", "batch": "8"},
                     {"tokens": "512:16", "batch": "64"}],
             "dataflow": [{"seq_len": "128"}], "scheduled-dag": [{}],
             "host-program": [{"weights": w} for w in ("persistent", "pcie", "ddr4")]}
OTHER_MODELS = {"scheduled-dag": ("cnn-lstm", "vfs"),
                "host-program": ("matvec", "lstm", "nmt-li")}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The zoo's transformers, then each default config written as a config.json."""
    paths = []
    for model_type in CONFIGS:
        folder = tmp_path_factory.mktemp(model_type)
        config = transformers.AutoConfig.for_model(model_type).to_dict()
        (folder / "config.json").write_text(json.dumps(config))
        paths.append(str(Path(folder) / "config.json"))
    return [*ZOO, *paths]


@pytest.mark.parametrize("strategy", sorted(s for s in strategies() if s != "chef-exact"))
def test_no_estimate_below_its_floors(strategy: str, models: list[str]) -> None:
    kind = api.get_strategy(strategy).plan_kind
    floors = kind.hook("floors")
    checked = 0
    for model in OTHER_MODELS.get(kind.name, models):
        for cluster in CLUSTERS[kind.name]:
            for workload in WORKLOADS[kind.name]:
                try:
                    result = api.plan_and_estimate(model, cluster, strategy, workload)
                except BelowFloor:
                    raise
                except ArchipelagoError:  # a refusal: the model or cluster does not fit
                    continue
                for phase in floors(result.plan, result.workload, result.estimate):
                    bound, why = phase.floor()
                    assert bound > 0, (model, cluster, phase.phase)
                    assert phase.estimate_s >= bound * (1 - 1e-9), (model, cluster, why)
                checked += 1
    assert checked >= 5, f"{strategy}: only {checked} estimates made it past the planner"
