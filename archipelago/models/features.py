"""The structural features a transformer may use beyond the plain GPT-2/BERT block, as one
typed vocabulary: a model family declares the features its models use, `ModelSpec.features`
answers the ones a spec has (from its fields), and a plan kind declares those it supports
when it registers (`strategies.registry.PlanKind`). A refusal is worked out from those sets
and worded once (`refusal`), never by comparing sentences.

A feature is a value, not an enum member, so a family in its own module may bring a new
one (`Feature("my_block", "my block")`) without editing this file; every kind that does
not declare it refuses it by its words.
"""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Feature:
    """`key`: a stable identifier; `words`: how a message names it to a user."""

    key: str
    words: str

    def __str__(self) -> str:
        return self.words


GATED_MLP = Feature("gated_mlp", "a gated MLP (GLU)")
BIASES = Feature("biases", "linear-layer biases")
RMSNORM = Feature("rmsnorm", "RMSNorm")
POST_NORM = Feature("post_norm", "post-norm blocks")
GROUPED_QUERY = Feature("grouped_query", "grouped-query attention")
EMBEDDING_NORM = Feature("embedding_norm", "a norm on the embeddings")
EXPLICIT_HEAD_DIM = Feature("explicit_head_dim", "an explicit head_dim")
PARAMETER_FREE_NORMS = Feature("parameter_free_norms", "parameter-free norms")
BIAS_FREE_LAYERNORMS = Feature("bias_free_layernorms", "bias-free LayerNorms")
UNEVEN_OUT_BIAS = Feature("uneven_out_bias", "an attention-output bias unlike q/k/v's")
LM_HEAD_BIAS = Feature("lm_head_bias", "an LM head bias")
PARALLEL_BLOCK = Feature("parallel_block", "parallel attention+MLP blocks")
OUTPUT_NORMS = Feature("output_norms", "norms after each sublayer instead of before")
BOTH_NORMS = Feature("both_norms", "norms before and after each sublayer")
HEAD_QK_NORMS = Feature("head_qk_norms", "per-head query/key norms")
WIDTH_QK_NORMS = Feature("width_qk_norms", "query/key norms over the whole width")
ALIBI = Feature("alibi", "ALiBi")
SLIDING_WINDOW = Feature("sliding_window", "sliding-window attention")
MIXED_SLIDING = Feature("mixed_sliding", "sliding-window and full attention layers mixed")
EXPERTS = Feature("experts", "a mixture of experts")
SHARED_EXPERTS = Feature("shared_experts", "shared experts")
MIXED_DENSE_MOE = Feature("mixed_dense_moe", "dense and MoE layers mixed")
LATENT_ATTENTION = Feature("latent_attention", "multi-head latent attention")

BUILTIN: frozenset[Feature] = frozenset({
    GATED_MLP, BIASES, RMSNORM, POST_NORM, GROUPED_QUERY, EMBEDDING_NORM, EXPLICIT_HEAD_DIM,
    PARAMETER_FREE_NORMS, BIAS_FREE_LAYERNORMS, UNEVEN_OUT_BIAS, LM_HEAD_BIAS, PARALLEL_BLOCK,
    OUTPUT_NORMS, BOTH_NORMS, HEAD_QK_NORMS, WIDTH_QK_NORMS, ALIBI, SLIDING_WINDOW,
    MIXED_SLIDING, EXPERTS, SHARED_EXPERTS, MIXED_DENSE_MOE, LATENT_ATTENTION})


def in_words(features: Iterable[Feature]) -> str:
    """'a, b and c', in a stable order."""
    words = [f.words for f in sorted(features)]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def refusal(who: str, action: str, model: str, missing: Iterable[Feature], scope: str,
            others: Iterable[str]) -> str:
    """The one line every kind refuses a model's unsupported features with: `who` cannot
    `action` `model`, the features it lacks in words, what does not support them
    (`scope`), and which strategies would (`others`)."""
    alternatives = sorted(others)
    then = (f"strategies that {action} it: {', '.join(alternatives)}" if alternatives
            else f"no strategy can {action} it")
    return (f"{who} cannot {action} {model}: it has {in_words(missing)}, which {scope} "
            f"does not support; {then}")
