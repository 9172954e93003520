"""A causal LM's structure read from the module tree transformers builds (models/hf_meta.py
builds it on the meta device), mapped onto ModelSpec's fields: the token embedding, every
decoder layer (its norms by their names, attention, a dense MLP or experts: hf_modules.py),
the final norm and the LM head (tied or not). Every parameter must land in a field; the
rest is refused in one line naming its module (`Unmapped`). What the tree cannot show is
read from the config only where it is unambiguous (the activation, which layers slide) and
refused where a family's code decides it (a parallel block)."""

from typing import Any

from torch import nn

from archipelago.models.hf_modules import (
    Norm,
    Unmapped,
    attention,
    experts,
    linear,
    mlp,
    norm,
    refuse,
    shapes,
    weighty,
)

# A block's norms by their child names: the ModelSpec fields of the layout each set of names
# is, as the decoder layers' forward() of transformers 5 runs them (LLaMA; Apertus;
# VaultGemma; Cohere, whose one norm feeds attention and MLP side by side; Gemma-2; GLM-4,
# whose post_attention_layernorm runs before the MLP; OLMo-2).
_PRE = {"sublayer_norms": "input"}
LAYOUTS: dict[frozenset[str], dict[str, Any]] = {
    frozenset({"input_layernorm", "post_attention_layernorm"}): _PRE,
    frozenset({"attention_layernorm", "feedforward_layernorm"}): _PRE,
    frozenset({"input_layernorm", "pre_feedforward_layernorm"}): _PRE,
    frozenset({"input_layernorm"}): {**_PRE, "parallel_block": True, "shared_block_norm": True},
    frozenset({"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
               "post_feedforward_layernorm"}): {"sublayer_norms": "both"},
    frozenset({"input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm",
               "post_mlp_layernorm"}): {"sublayer_norms": "both"},
    frozenset({"post_attention_layernorm", "post_feedforward_layernorm"}):
        {"sublayer_norms": "output"},
}
_ATTENTIONS = ("self_attn", "self_attention", "attention", "attn")
_MLPS = ("mlp", "feed_forward", "block_sparse_moe", "ffn")
# Config switches that run attention and MLP side by side: dataflow no module shows, read
# only by the hand-written families (gpt_neox, phi, gptj, falcon, stablelm).
PARALLEL_KEYS = ("use_parallel_residual", "parallel_attn", "parallel_residual",
                 "parallel_block")
ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function")
_BLOCK = ("norms named as LLaMA's, Cohere's, Gemma-2's, GLM-4's or OLMo-2's (pre-norm, one "
          "before a parallel block, both, or after each sublayer), attention "
          f"({'/'.join(_ATTENTIONS)}) and an MLP or experts ({'/'.join(_MLPS)})")


def read_model(model: nn.Module, config: Any) -> dict[str, Any]:
    """ModelSpec's fields (all but name, arch and hf_config) of a causal LM."""
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    base_name, base = _base(model, head)
    if not isinstance(embed, nn.Embedding) or shapes(embed).keys() != {"weight"}:
        raise refuse("input embeddings", embed, "are not one nn.Embedding table")
    vocab, hidden = embed.weight.shape
    list_name, layers = _layers(base)
    layers_path = f"{base_name}.{list_name}"
    norms: list[Norm] = []
    blocks = [_block(f"{layers_path}.{i}", layer, config, hidden, norms)
              for i, layer in enumerate(layers)]
    values: dict[str, Any] = dict(layers=len(layers), hidden=hidden, vocab=vocab)
    values.update(_outside(model, (base_name, base), list_name, embed, head, config))
    final = values.pop("_final", None)
    norms += [final] if final else []
    values.update(_uniform(blocks, layers_path))
    values.update(_norm_fields(norms, layers_path))
    values.update(_activation_and_window(config, len(layers)))
    return values


def _base(model: nn.Module, head: nn.Module | None) -> tuple[str, nn.Module]:
    """The decoder stack: the one weighty child beside the LM head."""
    others = {n: c for n, c in weighty(model).items() if c is not head}
    if shapes(model) or len(others) != 1:
        raise refuse("model", model, f"holds {sorted(others)} beside its LM head; read: one "
                     "decoder stack and the head")
    return next(iter(others.items()))


def _layers(base: nn.Module) -> tuple[str, nn.ModuleList]:
    lists = [(n, c) for n, c in weighty(base).items() if isinstance(c, nn.ModuleList)]
    if len(lists) != 1:
        raise refuse("model", base, f"holds {len(lists)} lists of layers; read: one")
    return lists[0]


def _outside(model: nn.Module, base: tuple[str, nn.Module], list_name: str,
             embed: nn.Module, head: nn.Module | None, config: Any) -> dict[str, Any]:
    """Embeddings, final norm and LM head: every weighty child of the stack besides its
    layers is one of them."""
    values: dict[str, Any] = dict(final_norm=False, learned_positions=False)
    vocab, hidden = embed.weight.shape
    positions = getattr(config, "max_position_embeddings", None)
    for name, child in weighty(base[1]).items():
        path = f"{base[0]}.{name}"
        if child is embed or name == list_name:
            continue
        if name in ("norm", "final_layernorm", "final_norm", "ln_f"):
            values["final_norm"], values["_final"] = True, norm(path, child)
        elif name in ("embed_positions", "wpe") and isinstance(child, nn.Embedding):
            positions = child.weight.shape[0]
            values["learned_positions"] = True
        else:
            raise refuse(path, child, "is not read; read beside the layers: embed_tokens, "
                         "embed_positions, the final norm")
    if not isinstance(positions, int) or positions <= 0:
        raise Unmapped("the config has no max_position_embeddings (the longest context)")
    values["max_positions"] = positions
    if head is None or weighty(head) or set(shapes(head)) - {"weight", "bias"}:
        raise refuse("lm_head", head or model, "is not one linear layer")
    head_in, head_out, head_bias = linear("lm_head", head)
    if (head_in, head_out) != (hidden, vocab):
        raise refuse("lm_head", head, f"maps {head_in}->{head_out}, not hidden {hidden} -> "
                     f"vocabulary {vocab}")
    values.update(tied_embeddings=head.weight is embed.weight, lm_head_bias=head_bias)
    return values


def _block(path: str, layer: nn.Module, config: Any, hidden: int,
           norms: list[Norm]) -> dict[str, Any]:
    """One layer's attention fields, its FFN (("dense", width, gated, bias) or ("moe",
    fields)) and its norm layout; its norms go to `norms`."""
    if shapes(layer):
        raise refuse(path, layer, f"holds its own parameters {sorted(shapes(layer))}")
    children = weighty(layer)
    names = {n for n in children if n.endswith(("layernorm", "_norm"))}
    mixers = [n for n in _ATTENTIONS if n in children]
    ffns = [n for n in _MLPS if n in children]
    for name, child in sorted(children.items(), key=lambda item: "norm" in item[0]):
        if name not in names and name not in mixers[:1] + ffns[:1]:
            raise refuse(f"{path}.{name}", child, f"is not read; a layer read holds {_BLOCK}")
    layout = LAYOUTS.get(frozenset(names))
    if layout is None or not mixers or not ffns:
        raise refuse(path, layer, f"holds {sorted(children)}; read: {_BLOCK}")
    for name in sorted(names):
        found = norm(f"{path}.{name}", children[name])
        if found.width not in (None, hidden):
            raise refuse(f"{path}.{name}", children[name], f"is {found.width} wide, not the "
                         f"hidden {hidden}")
        norms.append(found)
    attn, inner = attention(f"{path}.{mixers[0]}", children[mixers[0]], config, hidden)
    norms.extend(inner)
    ffn_path, ffn = f"{path}.{ffns[0]}", children[ffns[0]]
    moe = "experts" in dict(ffn.named_children())
    return dict(attention=attn, layout=layout,
                ffn=("moe", experts(ffn_path, ffn, config, hidden)) if moe
                else ("dense", *mlp(ffn_path, ffn, hidden)))


def _uniform(blocks: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """One attention and norm layout in every layer; dense and expert layers each of one
    shape (ModelSpec's dense layers beside its MoE ones)."""
    first = blocks[0]
    for i, block in enumerate(blocks):
        for key in ("attention", "layout"):
            if block[key] != first[key]:
                raise Unmapped(f"{path}.{i}'s {key} differs from {path}.0's ({block[key]} vs "
                               f"{first[key]}); read: every layer alike")
    dense = {b["ffn"][1:] for b in blocks if b["ffn"][0] == "dense"}
    routed = [b["ffn"][1] for b in blocks if b["ffn"][0] == "moe"]
    if len(dense) > 1 or any(m != routed[0] for m in routed):
        raise Unmapped(f"{path}: the layers' MLPs differ in shape (read: one dense shape "
                       "and one mixture of experts)")
    values: dict[str, Any] = dict(first["attention"], **first["layout"])
    if routed:
        moe = dict(routed[0], dense_layers=tuple(i for i, b in enumerate(blocks)
                                                 if b["ffn"][0] == "dense"))
        values["moe"] = moe
    width, gated, bias = dense.pop() if dense else (routed[0]["expert_ffn"], True, False)
    return {**values, "ffn": width, "gated_ffn": gated, "mlp_bias": bias}


def _norm_fields(norms: list[Norm], path: str) -> dict[str, Any]:
    """ModelSpec holds one norm kind, bias and affinity for all norms of a model (a q/k
    norm's bias is its own field)."""
    kinds = {(n.kind, n.width is not None) for n in norms}
    block_biases = {n.bias for n in norms}
    if len(kinds) != 1:
        raise Unmapped(f"{path}: norms of several kinds {sorted(kinds)}; read: one kind "
                       "(LayerNorm or RMSNorm, all with weights or none)")
    kind, affine = kinds.pop()
    return dict(norm=kind, norm_affine=affine, norm_bias=True in block_biases)


def _activation_and_window(config: Any, layers: int) -> dict[str, Any]:
    """The activation, the sliding layers (`layer_types`), and a refusal of what only a
    family's code knows (a parallel block, a window with no layer list)."""
    for key in PARALLEL_KEYS:
        if getattr(config, key, None) is True:
            raise Unmapped(f"config {key} runs attention and the MLP side by side, which no "
                           "module shows; read by the families gpt_neox, phi, gptj, falcon, "
                           "stablelm")
    act = next((getattr(config, k) for k in ACTIVATION_KEYS
                if isinstance(getattr(config, k, None), str)), None)
    if act is None:
        raise Unmapped(f"the config names no activation ({', '.join(ACTIVATION_KEYS)})")
    values: dict[str, Any] = dict(activation=act)
    kinds, window = getattr(config, "layer_types", None), getattr(config, "sliding_window", None)
    if isinstance(kinds, list | tuple):
        unknown = sorted(set(kinds) - {"full_attention", "sliding_attention"})
        if unknown or len(kinds) < layers:
            raise Unmapped(f"config layer_types {unknown or kinds} are not read (read: "
                           "full_attention, sliding_attention, one per layer)")
        ids = tuple(i for i, k in enumerate(kinds[:layers]) if k == "sliding_attention")
        if ids and (not isinstance(window, int) or window <= 0):
            raise Unmapped(f"sliding layers with sliding_window {window!r}")
        if ids:
            values.update(sliding_window=window, sliding_layers=ids)
    elif window and getattr(config, "use_sliding_window", True) is not False:
        raise Unmapped(f"config sliding_window {window!r} without layer_types: which layers "
                       "slide is the family's code")
    return values
