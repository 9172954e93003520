"""ModelSpec: the frozen, validated description every other layer reads a model from."""

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from archipelago.models import features as F
from archipelago.models.limits import (
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    MAX_WIDTH,
)
from archipelago.models.model_families import ensure_family, get_model_family, model_families

# The activation names a transformers config may give (transformers.activations.ACT2FN,
# 5.x): emulation builds the reference model from them, so any other name is a typo.
ACTIVATIONS = ("gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python",
               "gelu_python_tanh", "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu",
               "linear", "mish", "prelu", "quick_gelu", "relu", "relu2", "relu6", "sigmoid",
               "silu", "sqrtsoftplus", "swish", "tanh", "xielu")


class MoE(BaseModel):
    """Mixture of experts in the FFN (Mixtral, Qwen-MoE, DeepSeek): a router scores `experts`
    per token, the `per_token` best run, and `shared_ffn` columns of always-on shared experts
    (0: none) run beside them; layers listed in `dense_layers` keep the dense FFN of width
    ModelSpec.ffn instead (DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    experts: int = Field(gt=1, le=MAX_EXPERTS)
    per_token: int = Field(gt=0, le=MAX_EXPERTS)
    expert_ffn: int = Field(gt=0, le=MAX_WIDTH)
    shared_ffn: int = Field(default=0, ge=0, le=MAX_WIDTH)
    shared_gate: bool = False  # Qwen2-MoE scales the shared expert by sigmoid(h -> 1)
    dense_layers: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.per_token > self.experts:
            raise ValueError(f"experts per token {self.per_token} exceeds experts "
                             f"{self.experts}")
        return self

    @property
    def active_ffn(self) -> int:
        """FFN columns one token runs through: its routed experts plus the shared ones."""
        return self.per_token * self.expert_ffn + self.shared_ffn


class MLA(BaseModel):
    """DeepSeek's multi-head latent attention: queries through a rank-`q_rank` bottleneck
    (0: a direct projection), keys and values from a `kv_rank` latent that is what the KV
    cache holds, beside a `rope_dim` rotary key shared by all heads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q_rank: int = Field(ge=0, le=MAX_WIDTH)
    kv_rank: int = Field(gt=0, le=MAX_WIDTH)
    rope_dim: int = Field(gt=0, le=MAX_WIDTH)
    nope_dim: int = Field(gt=0, le=MAX_WIDTH)
    v_dim: int = Field(gt=0, le=MAX_WIDTH)

    @property
    def qk_dim(self) -> int:
        return self.rope_dim + self.nope_dim


class ModelSpec(BaseModel):
    """Architecture hyper-parameters of a transformer, independent of any framework."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    # What it is in a user's words, one and many: a strategy that refuses it says so.
    kind_words: ClassVar[tuple[str, str]] = ("a transformer", "transformers")

    name: str
    arch: str  # a registered family's model_type (models/model_families.py)
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
    # Structure beyond the GPT-2/OPT/LLaMA/BERT blocks, every default the plain block.
    head_size: int | None = Field(default=None, gt=0, le=MAX_WIDTH)  # explicit head_dim
    norm_bias: bool = True          # LayerNorm with a bias (ignored for RMSNorm)
    norm_affine: bool = True        # False: OLMo's LayerNorm has no parameters at all
    attn_out_bias: bool | None = None  # None: as attn_bias (Qwen2 biases q/k/v only)
    lm_head_bias: bool = False      # GPT-J, CodeGen, Phi
    parallel_block: bool = False    # attention and FFN read the same input (GPT-J, NeoX)
    shared_block_norm: bool = False  # ... through one norm (GPT-J, Phi, Falcon-7B)
    sublayer_norms: Literal["input", "output", "both"] = "input"  # OLMo-2 output, Gemma-2 both
    qk_norm: Literal["none", "head", "width"] = "none"  # per head_dim (Qwen3) or whole width
    qk_norm_bias: bool = False
    alibi: bool = False             # linear score biases instead of position embeddings
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_POSITIONS)
    sliding_layers: tuple[int, ...] = ()  # indices of the layers that use the window
    moe: MoE | None = None
    mla: MLA | None = None
    hf_config: dict[str, Any] = Field(default_factory=dict, repr=False)

    def __setstate__(self, state: Any) -> None:
        """Unpickled in another process: its family, if read there from transformers'
        model, is registered here too before anything asks for it."""
        super().__setstate__(state)
        ensure_family(self.arch, self.hf_config)

    @field_validator("activation")
    @classmethod
    def _known_activation(cls, name: str) -> str:
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{name[:40]}'; valid: {', '.join(ACTIVATIONS)}")
        return name

    @field_validator("arch")
    @classmethod
    def _known_arch(cls, arch: str) -> str:
        if arch not in model_families():
            raise ValueError(f"unknown architecture '{arch[:40]}'; valid: "
                             f"{', '.join(sorted(model_families()))}")
        return arch

    @model_validator(mode="after")
    def _check_shapes(self) -> "ModelSpec":
        if self.hidden % self.heads and self.head_size is None and self.mla is None:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}")
        if (self.sliding_window is None) != (not self.sliding_layers):
            raise ValueError("a sliding window needs the layers that use it")
        for what, ids in (("sliding", self.sliding_layers),
                          ("dense", self.moe.dense_layers if self.moe else ())):
            if any(not 0 <= i < self.layers for i in ids) or len(set(ids)) != len(ids):
                raise ValueError(f"{what} layer indices {ids} must be distinct, in 0.."
                                 f"{self.layers - 1}")
        return self

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of all query heads together (the hidden size unless head_dim is explicit)."""
        return self.heads * self.head_dim

    @property
    def out_bias(self) -> bool:
        return self.attn_bias if self.attn_out_bias is None else self.attn_out_bias

    @property
    def moe_layers(self) -> int:
        return self.layers - len(self.moe.dense_layers) if self.moe else 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer not in self.moe.dense_layers

    def window(self, layer: int) -> int | None:
        """The keys one query attends to at most in `layer` (None: the whole context)."""
        return self.sliding_window if layer in self.sliding_layers else None

    def kv_values_per_token(self) -> int:
        """Values one layer caches per token: K and V per KV head, or MLA's latent plus its
        shared rotary key (DeepSeek-V2 §2.1.2)."""
        if self.mla:
            return self.mla.kv_rank + self.mla.rope_dim
        return 2 * self.kv_dim

    @property
    def features(self) -> frozenset[F.Feature]:
        """The structural features this spec uses beyond a plain GPT-2/BERT block (the one
        place they are read from its fields), and those its family has whatever the fields
        say: a strategy or emulator refuses those its kind does not declare."""
        moe = self.moe
        found = {
            F.GATED_MLP: self.gated_ffn,
            F.BIASES: self.attn_bias or self.out_bias or self.mlp_bias,
            F.RMSNORM: self.norm == "rmsnorm",
            F.POST_NORM: not self.pre_norm,
            F.GROUPED_QUERY: self.kv_heads < self.heads,
            F.EMBEDDING_NORM: self.embedding_norm,
            F.EXPLICIT_HEAD_DIM: self.head_size is not None and self.q_dim != self.hidden,
            F.PARAMETER_FREE_NORMS: not self.norm_affine,
            F.BIAS_FREE_LAYERNORMS: self.norm == "layernorm" and not self.norm_bias,
            F.UNEVEN_OUT_BIAS: self.out_bias != self.attn_bias,
            F.LM_HEAD_BIAS: self.lm_head_bias,
            F.PARALLEL_BLOCK: self.parallel_block,
            F.OUTPUT_NORMS: self.sublayer_norms == "output",
            F.BOTH_NORMS: self.sublayer_norms == "both",
            F.HEAD_QK_NORMS: self.qk_norm == "head",
            F.WIDTH_QK_NORMS: self.qk_norm == "width",
            F.ALIBI: self.alibi,
            F.SLIDING_WINDOW: len(self.sliding_layers) == self.layers,
            F.MIXED_SLIDING: 0 < len(self.sliding_layers) < self.layers,
            F.EXPERTS: moe is not None,
            F.SHARED_EXPERTS: bool(moe and (moe.shared_ffn or moe.shared_gate)),
            F.MIXED_DENSE_MOE: bool(moe and moe.dense_layers),
            F.LATENT_ATTENTION: self.mla is not None,
        }
        used = frozenset(feature for feature, present in found.items() if present)
        return used | get_model_family(self.arch).inherent

    @property
    def is_decoder(self) -> bool:
        """Causal language models generate tokens; encoders map a sequence once."""
        return get_model_family(self.arch).decoder

    @property
    def widest_ffn(self) -> int:
        """The widest FFN activation one token produces (what its buffers and syncs must
        hold): a mixture of experts' routed and shared columns together, else the FFN."""
        return max(self.ffn, self.moe.active_ffn) if self.moe else self.ffn

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim
