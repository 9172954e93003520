"""ModelSpec: the frozen, validated description every other layer reads a model from."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Arch = Literal["gpt2", "opt", "llama", "bert", "roberta", "ibert"]
DECODER_ARCHS: frozenset[str] = frozenset({"gpt2", "opt", "llama"})


class ModelSpec(BaseModel):
    """Architecture hyper-parameters of a transformer, independent of any framework."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arch: Arch
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    ffn: int = Field(gt=0)
    vocab: int = Field(gt=0)
    max_positions: int = Field(gt=0)
    activation: str
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    pre_norm: bool = True
    gated_ffn: bool = False
    attn_bias: bool = True
    mlp_bias: bool = True
    tied_embeddings: bool = True
    learned_positions: bool = True
    position_offset: int = 0
    type_vocab: int = 0
    embedding_norm: bool = False
    final_norm: bool = True
    embed_proj_dim: int | None = None
    hf_config: dict[str, Any] = Field(default_factory=dict, repr=False)

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
