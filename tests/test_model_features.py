"""Model features are declared, not matched by text. A toy family registered from this module
alone (no other file edited) brings a feature of its own: every kind that does not declare
it refuses the model in one line naming the feature and the strategies that do plan it, and
a toy kind declaring it plans the model through the real CLI; a toy family declaring its
own numerics is emulated with them, or refused in one line. Every built-in family's
features against hand-written expectations, and the tensor-parallel planner's and
emulator's refusals drawn from one vocabulary."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.engines.base import EngineConfig
from archipelago.errors import PartitionError
from archipelago.estimate.summary import Figure, Summary
from archipelago.estimate.workload import parse_tokens
from archipelago.hardware.cluster import Cluster, resolve_cluster
from archipelago.models import features as F
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.hf_families.llama import LLAMA_FEATURES, LLAMA_NAMES, llama_like
from archipelago.models.model_families import (
    FamilyNumerics,
    FixedOption,
    ModelFamily,
    get_model_family,
    model_families,
    register_model_family,
    unregister_model_family,
)
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.strategies import registry
from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.tensor_parallel import EMULATES, SPLITS
from archipelago.strategies.tensor_parallel.emulate import check
from archipelago.strategies.tensor_parallel.emulate.numerics import Numerics, numerics
from tests.test_hf_families import DECODERS, ENCODERS, VARIANTS, config

HERE = __name__
ROTATING = F.Feature("rotating_heads", "attention heads that rotate each layer")
TOY_FIELDS = dict(model_type="toylm", hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                  vocab_size=128, max_position_embeddings=64)


@dataclass(frozen=True)
class ToyPlan:
    strategy: str
    spec: ModelSpec
    devices: int


def parse_steps(steps: str) -> int:
    return int(steps)


def estimate(plan: ToyPlan, workload: int) -> dict[str, Any]:
    """Each device holds its share of the parameters."""
    return {"parameters_per_device": parameter_count(plan.spec) // plan.devices}


def summarize(plan: ToyPlan, workload: int, est: dict) -> Summary:
    share = est["parameters_per_device"]
    return Summary([Figure("model", plan.spec.name), Figure("strategy", plan.strategy),
                    Figure("parameters_per_device", share)],
                   notes=[f"{plan.spec.name}: {share} parameters per device"])


def plan_rotating(spec: ModelSpec, cluster: Cluster, config: EngineConfig,
                  workload: int) -> ToyPlan:
    refused = registry.feature_refusal(spec, "toy-rotating")
    if refused:
        raise PartitionError(refused)
    return ToyPlan("toy-rotating", spec, cluster.size)


@pytest.fixture
def toy_family() -> Iterator[ModelFamily]:
    """The toy family (LLaMA's reader and layout, heads that rotate: a structure no
    ModelSpec field says) and a toy kind that declares it beside every built-in feature."""
    family = register_model_family(ModelFamily(
        "toylm", lambda f: llama_like(f, "toylm"), decoder=True,
        features=LLAMA_FEATURES | {ROTATING}, inherent=frozenset({ROTATING})))
    registry.register_kind(registry.PlanKind(
        "rotating", WorkloadType("toy", (WorkloadOption("steps", "steps", "1"),), parse_steps),
        estimator=f"{HERE}:estimate", report=HERE, supports=F.BUILTIN | {ROTATING}))
    registry.register("toy-rotating", "a toy kind that splits rotating heads", "rotating",
                      EngineConfig)(plan_rotating)
    try:
        yield family
    finally:
        registry.unregister("toy-rotating")
        unregister_model_family("toylm")


def toy_spec() -> ModelSpec:
    return spec_from_hf_config(TOY_FIELDS, "toy-7", "toy.json")


def toy_file(tmp_path: Path) -> str:
    path = tmp_path / "toy-7" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TOY_FIELDS))
    return str(path)


def test_a_toy_family_brings_its_feature(toy_family: ModelFamily) -> None:
    spec = toy_spec()
    assert spec.arch == "toylm" and spec.is_decoder
    assert spec.features == {ROTATING, F.GATED_MLP, F.RMSNORM, F.GROUPED_QUERY}
    assert get_model_family("toylm") is toy_family


@pytest.mark.parametrize("strategy", ["dfx", "lora-q", "gpu-graph"])
def test_kinds_that_do_not_declare_it_refuse_it_in_one_line(toy_family: ModelFamily,
                                                            strategy: str) -> None:
    cluster = "2xh100" if strategy.startswith("gpu") else "2xu280"
    with pytest.raises(PartitionError) as err:
        chosen = registry.get_strategy(strategy)
        chosen.plan(toy_spec(), resolve_cluster(cluster), None, chosen.workload())
    kind = registry.get_strategy(strategy).kind
    assert str(err.value) == (
        f"strategy '{strategy}' cannot split toy-7: it has attention heads that rotate each "
        f"layer, which the {kind} planner does not support; strategies that split it: "
        "toy-rotating")


def test_the_cli_refuses_it_and_plans_it_with_the_kind_that_declares_it(
        toy_family: ModelFamily, tmp_path: Path) -> None:
    path = toy_file(tmp_path)
    refused = CliRunner().invoke(app, ["plan", path, "--cluster", "2xu280", "--strategy",
                                       "lora-f"])
    assert refused.exit_code == 2
    assert refused.output.count("\n") == 1 and "attention heads that rotate" in refused.output
    planned = CliRunner().invoke(app, ["plan", path, "--cluster", "2xu280", "--strategy",
                                       "toy-rotating", "--json"])
    assert planned.exit_code == 0, planned.output
    # LLaMA-shaped by hand: embeddings and untied head 2 x 128 x 64, final norm 64; per
    # layer q, o 64x64, k, v 64x32 (2 KV heads of 16), gate, up, down 64x128, two norms.
    layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    total = 2 * 128 * 64 + 64 + 2 * layer
    assert json.loads(planned.stdout)["parameters_per_device"] == total // 2


def test_a_family_must_declare_what_it_always_has() -> None:
    with pytest.raises(ValueError, match="inherent features must be declared"):
        register_model_family(ModelFamily("toylm", lambda f: {}, decoder=True,
                                          features=frozenset(),
                                          inherent=frozenset({ROTATING})))
    assert "toylm" not in model_families()


# Each family's transformers default config, by hand: which of its switches are on.
_LLAMA = {F.GATED_MLP, F.RMSNORM}
EXPECTED = {
    "GPT2": {F.BIASES},
    "OPT": {F.BIASES},
    "Llama": _LLAMA,
    "Mixtral": _LLAMA | {F.GROUPED_QUERY, F.EXPERTS},   # 8 KV heads of 32
    "Qwen2": _LLAMA | {F.BIASES, F.UNEVEN_OUT_BIAS},    # q/k/v biased, output not
    "Qwen3": _LLAMA | {F.HEAD_QK_NORMS},                 # 32 KV heads of 32
    "Phi": {F.BIASES, F.PARALLEL_BLOCK, F.LM_HEAD_BIAS},
    "Gemma": _LLAMA | {F.EXPLICIT_HEAD_DIM},            # 16 heads x 256 != 3072
    "Gemma2": _LLAMA | {F.EXPLICIT_HEAD_DIM, F.GROUPED_QUERY, F.BOTH_NORMS, F.MIXED_SLIDING},
    "GPTNeoX": {F.BIASES, F.PARALLEL_BLOCK},
    "Falcon": {F.GROUPED_QUERY, F.PARALLEL_BLOCK},      # multi-query, bias off
    "Bloom": {F.BIASES, F.ALIBI, F.EMBEDDING_NORM},
    "GPTJ": {F.BIASES, F.PARALLEL_BLOCK, F.LM_HEAD_BIAS},
    "Olmo": {F.GATED_MLP, F.PARAMETER_FREE_NORMS},
    "Olmo2": _LLAMA | {F.OUTPUT_NORMS, F.WIDTH_QK_NORMS},
    "DeepseekV3": _LLAMA | {F.LATENT_ATTENTION, F.EXPERTS, F.SHARED_EXPERTS, F.MIXED_DENSE_MOE},
    "Bert": {F.BIASES, F.POST_NORM, F.EMBEDDING_NORM},
}


@pytest.mark.parametrize("family", EXPECTED)
def test_builtin_family_features_by_hand(family: str) -> None:
    assert spec_from_hf_config(config(family), family, "t").features == EXPECTED[family]


@pytest.mark.parametrize(("family", "fields"),
                         [(f, {}) for f in DECODERS] + VARIANTS + ENCODERS,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_a_spec_has_only_features_its_family_declares(family: str, fields: dict) -> None:
    spec = spec_from_hf_config(config(family, **fields), family, "t")
    assert spec.features <= get_model_family(spec.arch).features


def tiny(family: str, **fields: object) -> ModelSpec:
    sizes = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                 max_position_embeddings=64)
    return spec_from_hf_config(config(family, **{**sizes, **fields}), family.lower(), "t")


def test_the_emulator_runs_a_subset_of_what_the_planner_splits() -> None:
    assert EMULATES < SPLITS
    kind = registry.get_kind("tensor-parallel")
    assert kind.handles("split") == SPLITS and kind.handles("emulate") == EMULATES


def test_plan_and_emulate_refuse_a_feature_in_the_same_words() -> None:
    """What the planner refuses the emulator refuses too, named alike; DeepSeek-V3's latent
    attention, shared experts and dense layers before its MoE ones are split and
    emulated."""
    olmo = "norms after each sublayer instead of before and query/key norms over the whole width"
    deepseek = tiny("DeepseekV3", n_routed_experts=4, num_experts_per_tok=2, n_group=2,
                    topk_group=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
                    qk_nope_head_dim=8, v_head_dim=16, moe_intermediate_size=32)
    for action in ("split", "emulate"):
        assert registry.feature_refusal(deepseek, "lora-f", action) is None  # type: ignore
        line = registry.feature_refusal(tiny("Olmo2"), "lora-f", action)  # type: ignore
        assert line is not None and f": it has {olmo}, which " in line, (action, line)
    line = registry.feature_refusal(tiny("Olmo2"), "lora-f", "split")
    assert line is not None and line.endswith("strategies that split it: gpu-eager, "
                                              "gpu-graph")


def test_the_emulator_refuses_an_introspected_family_in_one_line() -> None:
    """A model_type with no built-in family is read from the model transformers builds
    (Arcee: a non-gated relu2 MLP) and planned; its checkpoint names and numerics are no
    family's, so emulation refuses it by name."""
    spec = spec_from_hf_config({**TOY_FIELDS, "model_type": "arcee", "bos_token_id": None,
                                "eos_token_id": None}, "arcee-1", "c.json")
    assert not spec.gated_ffn and spec.activation == "relu2"
    assert get_model_family("arcee").names is None
    lora = registry.get_strategy("lora-f")
    plan = lora.plan(spec, resolve_cluster("2xu280"), None, lora.workload()).program
    with pytest.raises(EmulationError, match=r"decoders, not 'arcee'") as err:
        check(plan, None)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


@pytest.fixture
def toy_numerics() -> Iterator[None]:
    """Two toy families with LLaMA's reader and state-dict names and no feature of their own:
    `toynum` declares its numerics (an epsilon under its own key, a rotary base and an
    option it computes one way only, every default unlike any built-in family's);
    `toybare` declares none."""
    declared = FamilyNumerics(3e-4, "toy_norm_eps", rope_theta=2500.0, fixed={
        "toy_score_scale": FixedOption("sqrt", "sqrt"),
        "toy_rope_kind": FixedOption("plain", "plain", within="toy_rope")})
    for arch, numbers in (("toynum", declared), ("toybare", None)):
        register_model_family(ModelFamily(
            arch, lambda f, arch=arch: llama_like(f, arch), decoder=True,
            features=LLAMA_FEATURES, names=LLAMA_NAMES, numerics=numbers))
    try:
        yield
    finally:
        unregister_model_family("toynum")
        unregister_model_family("toybare")


def toy_check(**fields: object) -> ModelSpec:
    """The emulator's checks of a lora-f plan of a toy config on 2 ranks; its spec."""
    spec = spec_from_hf_config({**TOY_FIELDS, **fields}, "toy-7", "toy.json")
    lora = registry.get_strategy("lora-f")
    plan = lora.plan(spec, resolve_cluster("2xu280"), None, lora.workload()).program
    check(plan, EmulationJob(parse_tokens("4:4")))
    return spec


def test_a_toy_family_is_emulated_with_the_numerics_it_declares(toy_numerics: None) -> None:
    assert numerics(toy_check(model_type="toynum")) == Numerics(3e-4, 2500.0)
    spec = toy_check(model_type="toynum", toy_norm_eps=0.25, rope_theta=9.0,
                     toy_score_scale="sqrt", toy_rope={"toy_rope_kind": "plain"})
    assert numerics(spec) == Numerics(0.25, 9.0)
    for fields, line in [
            ({"toy_score_scale": "none"}, "config toy_score_scale='none' is not emulated "
                                          "(only 'sqrt')"),
            ({"toy_rope": {"toy_rope_kind": "yarn"}}, "config toy_rope_kind='yarn' is not "
                                                      "emulated (only 'plain')")]:
        with pytest.raises(EmulationError) as err:
            toy_check(model_type="toynum", **fields)
        assert str(err.value) == f"toy-7: {line}"
    with pytest.raises(EmulationError) as err:
        toy_check(model_type="toybare")
    assert str(err.value) == ("toy-7: architecture 'toybare' is not emulated (deepseek_v3, "
                              "gpt2, llama, mistral, mixtral, opt, qwen2, qwen3, toynum are)")


def test_features_in_words() -> None:
    assert F.in_words([F.ALIBI]) == "ALiBi"
    assert F.in_words([F.RMSNORM, F.ALIBI, F.BIASES]) == "ALiBi, linear-layer biases and RMSNorm"
    with pytest.raises(ValidationError,
                       match=r"unknown architecture 'nope'; valid: (.*, )?bert, "):
        ModelSpec(name="x", arch="nope", layers=1, hidden=8, heads=1, kv_heads=1, ffn=8,
                  vocab=8, max_positions=8, activation="gelu")


def test_the_dataflow_kind_builds_bert_blocks_only() -> None:
    """Galapagos unrolls I-BERT's block: an encoder with a gated MLP is refused by name."""
    bert = spec_from_hf_config(config("Bert", num_hidden_layers=2, hidden_size=64,
                                                  num_attention_heads=4, intermediate_size=128),
                                           "bert-tiny", "t")
    galapagos = registry.get_strategy("galapagos")
    work = galapagos.workload()
    assert galapagos.plan(bert, resolve_cluster("4xsidewinder"), None, work).spec == bert
    gated = bert.model_copy(update={"name": "gated-bert", "gated_ffn": True})
    with pytest.raises(PartitionError, match=r"^strategy 'galapagos' cannot split gated-bert: "
                       r"it has a gated MLP \(GLU\), which the dataflow planner does not"):
        galapagos.plan(gated, resolve_cluster("4xsidewinder"), None, work)
