"""ModelSpec: the frozen, validated description every other layer reads a model from."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# One arch per transformers model_type whose fields are read (models/hf_config.py); the
# encoders stay last. An arch names the field layout, the structure is in the fields below.
DecoderArch = Literal["gpt2", "opt", "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                      "qwen3_moe", "phi", "phi3", "gemma", "gemma2", "gpt_neox", "falcon",
                      "bloom", "gptj", "codegen", "stablelm", "olmo", "olmo2", "granite",
                      "deepseek_v3"]
EncoderArch = Literal["bert", "roberta", "ibert", "distilbert", "electra", "xlm-roberta",
                      "deberta-v2"]
Arch = DecoderArch | EncoderArch
DECODER_ARCHS: frozenset[str] = frozenset(DecoderArch.__args__)
# RoBERTa's layout: position ids start after the padding index, inside max_positions.
ROBERTA_LIKE: frozenset[str] = frozenset({"roberta", "ibert", "xlm-roberta"})


# Bounds far above any published transformer (the largest have ~128 layers, hidden 16384,
# a 256k vocabulary): a size beyond them is a typo that would only make the planner crawl.
MAX_LAYERS = 1024
MAX_WIDTH = 2**18  # hidden, ffn and embedding projection widths
MAX_HEADS = 4096
MAX_VOCAB = 2**22
MAX_POSITIONS = 2**22
MAX_EXPERTS = 4096  # DeepSeek-V3 routes over 256
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

    @field_validator("activation")
    @classmethod
    def _known_activation(cls, name: str) -> str:
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{name[:40]}'; valid: {', '.join(ACTIVATIONS)}")
        return name

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
    def extensions(self) -> tuple[str, ...]:
        """The structural features this spec uses beyond a plain GPT-2/OPT/LLaMA/BERT block,
        named for messages: a strategy or emulator refuses those it cannot build."""
        found = {
            "an explicit head_dim": self.head_size is not None and self.q_dim != self.hidden,
            "parameter-free norms": not self.norm_affine,
            "bias-free LayerNorms": self.norm == "layernorm" and not self.norm_bias,
            "an attention-output bias unlike q/k/v's": self.out_bias != self.attn_bias,
            "an LM head bias": self.lm_head_bias,
            "parallel attention+MLP blocks": self.parallel_block,
            f"sublayer norms on the '{self.sublayer_norms}' side": self.sublayer_norms != "input",
            "per-head query/key norms": self.qk_norm == "head",
            "query/key norms over the whole width": self.qk_norm == "width",
            "ALiBi": self.alibi,
            "sliding-window attention": len(self.sliding_layers) == self.layers,
            "sliding-window and full attention layers mixed":
                0 < len(self.sliding_layers) < self.layers,
            "mixture of experts": self.moe is not None,
            "dense and MoE layers mixed": bool(self.moe and self.moe.dense_layers),
            "multi-head latent attention": self.mla is not None,
            f"model_type '{self.hf_config.get('model_type')}' read as a {self.arch}":
                self.hf_config.get("model_type", self.arch) != self.arch,
        }
        return tuple(name for name, used in found.items() if used)

    @property
    def is_decoder(self) -> bool:
        """Causal language models generate tokens; encoders map a sequence once."""
        return self.arch in DECODER_ARCHS

    @property
    def widest_ffn(self) -> int:
        """The widest FFN activation one token produces (what its buffers and syncs must
        hold): a mixture of experts' routed and shared columns together, else the FFN."""
        return max(self.ffn, self.moe.active_ffn) if self.moe else self.ffn

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim
