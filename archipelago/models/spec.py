"""ModelSpec: the frozen, validated description every other layer reads a model from."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Arch = Literal["gpt2", "opt", "llama", "bert", "roberta", "ibert"]
DECODER_ARCHS: frozenset[str] = frozenset({"gpt2", "opt", "llama"})


# Bounds far above any published transformer (the largest have ~128 layers, hidden 16384,
# a 256k vocabulary): a size beyond them is a typo that would only make the planner crawl.
MAX_LAYERS = 1024
MAX_WIDTH = 2**18  # hidden, ffn and embedding projection widths
MAX_HEADS = 4096
MAX_VOCAB = 2**22
MAX_POSITIONS = 2**22
# The activation names a transformers config may give (transformers.activations.ACT2FN,
# 5.x): emulation builds the reference model from them, so any other name is a typo.
ACTIVATIONS = ("gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python",
               "gelu_python_tanh", "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu",
               "linear", "mish", "prelu", "quick_gelu", "relu", "relu2", "relu6", "sigmoid",
               "silu", "sqrtsoftplus", "swish", "tanh", "xielu")


class ModelSpec(BaseModel):
    """Architecture hyper-parameters of a transformer, independent of any framework."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arch: Arch
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    heads: int = Field(gt=0, le=MAX_HEADS)
    kv_heads: int = Field(gt=0, le=MAX_HEADS)
    ffn: int = Field(gt=0, le=MAX_WIDTH)
    vocab: int = Field(gt=0, le=MAX_VOCAB)
    max_positions: int = Field(gt=0, le=MAX_POSITIONS)
    activation: str
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    pre_norm: bool = True
    gated_ffn: bool = False
    attn_bias: bool = True
    mlp_bias: bool = True
    tied_embeddings: bool = True
    learned_positions: bool = True
    position_offset: int = Field(default=0, ge=0, le=MAX_POSITIONS)
    type_vocab: int = Field(default=0, ge=0, le=MAX_VOCAB)
    embedding_norm: bool = False
    final_norm: bool = True
    embed_proj_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    hf_config: dict[str, Any] = Field(default_factory=dict, repr=False)

    @field_validator("activation")
    @classmethod
    def _known_activation(cls, name: str) -> str:
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{name[:40]}'; valid: {', '.join(ACTIVATIONS)}")
        return name

    @model_validator(mode="after")
    def _check_shapes(self) -> "ModelSpec":
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def is_decoder(self) -> bool:
        """Causal language models generate tokens; encoders map a sequence once."""
        return self.arch in DECODER_ARCHS

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim
