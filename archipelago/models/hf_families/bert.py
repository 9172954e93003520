"""The BERT-shaped encoders (post-norm blocks, learned positions, an embedding LayerNorm)
that the `galapagos` strategy unrolls: BERT, RoBERTa (positions offset by the padding
index), I-BERT, XLM-R (RoBERTa's layout with its own vocabulary), ELECTRA and DeBERTa-v2 at
the hidden width, DistilBERT under its own field names."""

from typing import Any

from archipelago.errors import ConfigError
from archipelago.models.features import BIASES, EMBEDDING_NORM, POST_NORM
from archipelago.models.hf_fields import Fields
from archipelago.models.model_families import ModelFamily, Reader, register_model_family

# RoBERTa's layout: position ids start after the padding index, inside max_positions.
_ROBERTA_LIKE = frozenset({"roberta", "ibert", "xlm-roberta"})
_ENCODER = {"layer_norm_eps": "positive", "initializer_range": "std",
            "hidden_dropout_prob": "probability", "attention_probs_dropout_prob": "probability",
            "tie_word_embeddings": "bool"}
_BERT_LIKE = {**_ENCODER, "use_cache": "bool", "add_cross_attention": "bool"}


def _bert_like(arch: str) -> Reader:
    def read(f: Fields) -> dict[str, Any]:
        heads = f.int("num_attention_heads")
        return dict(
            arch=arch, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
            heads=heads, kv_heads=heads, ffn=f.int("intermediate_size"),
            vocab=f.int("vocab_size"), max_positions=f.int("max_position_embeddings"),
            activation=f.str("hidden_act", "gelu"), pre_norm=False, final_norm=False,
            embedding_norm=True,
            type_vocab=f.count("type_vocab_size") if "type_vocab_size" in f.config else 2,
            position_offset=2 if arch in _ROBERTA_LIKE else 0,
        )
    return read


def _same_width_embeddings(f: Fields, model_type: str) -> None:
    """ELECTRA and DeBERTa may embed at a narrower embedding_size and project up (with a
    bias, after the embedding LayerNorm): a layout ModelSpec does not hold."""
    width = f.config.get("embedding_size")
    if width is not None and width != f.config.get("hidden_size"):
        raise ConfigError(f.source, "embedding_size", f"{model_type} embeddings of width "
                          f"{width} projected to hidden_size {f.config.get('hidden_size')} are "
                          "not modelled; only embedding_size == hidden_size is read")


def _electra(f: Fields) -> dict[str, Any]:
    _same_width_embeddings(f, "electra")
    return _bert_like("electra")(f)


def _deberta_v2(f: Fields) -> dict[str, Any]:
    """DeBERTa-v2/v3 without relative attention is BERT-shaped (no token types by
    default); its disentangled attention's relative-position projections are refused."""
    _same_width_embeddings(f, "deberta-v2")
    if f.bool("relative_attention", False):
        raise ConfigError(f.source, "relative_attention", "DeBERTa's disentangled attention "
                          "(content-to-position and position-to-content scores over shared "
                          "relative embeddings) is not modelled; only relative_attention: "
                          "false is read")
    if f.count("conv_kernel_size"):
        raise ConfigError(f.source, "conv_kernel_size", "DeBERTa's convolution beside the "
                          "first layer is not modelled")
    values = _bert_like("deberta-v2")(f)
    return {**values, "learned_positions": f.bool("position_biased_input", True)}


def _distilbert(f: Fields) -> dict[str, Any]:
    """DistilBERT: BERT's block under other field names, no token types."""
    heads = f.int("n_heads")
    return dict(
        arch="distilbert", layers=f.int("n_layers"), hidden=f.int("dim"), heads=heads,
        kv_heads=heads, ffn=f.int("hidden_dim"), vocab=f.int("vocab_size"),
        max_positions=f.int("max_position_embeddings"), activation=f.str("activation", "gelu"),
        pre_norm=False, final_norm=False, embedding_norm=True, type_vocab=0,
    )


_READERS: dict[str, tuple[Reader, dict[str, str]]] = {
    "bert": (_bert_like("bert"), _BERT_LIKE),
    "roberta": (_bert_like("roberta"), _BERT_LIKE),
    "ibert": (_bert_like("ibert"), {**_ENCODER, "quant_mode": "bool"}),
    "xlm-roberta": (_bert_like("xlm-roberta"), {}),
    "electra": (_electra, {}),
    "deberta-v2": (_deberta_v2, {}),
    "distilbert": (_distilbert, {}),
}
for _arch, (_read, _checked) in _READERS.items():
    register_model_family(ModelFamily(_arch, _read, decoder=False,
                                      features=frozenset({BIASES, POST_NORM, EMBEDDING_NORM}),
                                      checked=_checked,
                                      offset_in_positions=_arch in _ROBERTA_LIKE))
