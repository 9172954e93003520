"""Readers for the BERT-shaped encoder families (post-norm blocks, learned positions, an
embedding LayerNorm) that the `galapagos` strategy unrolls, and the one-line reasons the
encoders whose structure ModelSpec cannot hold are refused."""

from collections.abc import Callable
from typing import Any

from archipelago.errors import ConfigError
from archipelago.models.hf_fields import Fields
from archipelago.models.spec import ROBERTA_LIKE

Reader = Callable[[Fields], dict[str, Any]]


def _bert_like(arch: str) -> Reader:
    """BERT, RoBERTa (positions offset by the padding index), I-BERT, XLM-R (RoBERTa's
    layout with its own vocabulary)."""
    def read(f: Fields) -> dict[str, Any]:
        heads = f.int("num_attention_heads")
        return dict(
            arch=arch, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
            heads=heads, kv_heads=heads, ffn=f.int("intermediate_size"),
            vocab=f.int("vocab_size"), max_positions=f.int("max_position_embeddings"),
            activation=f.str("hidden_act", "gelu"), pre_norm=False, final_norm=False,
            embedding_norm=True,
            type_vocab=f.count("type_vocab_size") if "type_vocab_size" in f.config else 2,
            position_offset=2 if arch in ROBERTA_LIKE else 0,
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


ENCODER_READERS: dict[str, Reader] = {
    "bert": _bert_like("bert"),
    "roberta": _bert_like("roberta"),
    "ibert": _bert_like("ibert"),
    "xlm-roberta": _bert_like("xlm-roberta"),
    "electra": _electra,
    "deberta-v2": _deberta_v2,
    "distilbert": _distilbert,
}
# Encoders transformers ships whose structure ModelSpec cannot hold, with why.
NOT_READ_ENCODERS = {
    "albert": "ALBERT shares one set of layer weights across all layers (num_hidden_groups) "
              "and embeds at a narrower width projected up; ModelSpec holds one weight set "
              "per layer, so its parameters would be counted num_hidden_layers times",
    "modernbert": "ModernBERT's pre-norm GeGLU encoder (no attention norm in its first layer, "
                  "local and global attention alternating, rotary positions) is not modelled",
}
