"""One decoder layer's parts as transformers builds them (on the meta device), each read into
ModelSpec's terms: norms, attention (separate, fused or latent projections), a dense MLP
(gated or not) and a mixture of experts (router, experts stored fused as 3-D parameters,
shared experts). What a part holds that no ModelSpec field says is `Unmapped`: one line
naming the module's path and class, and what is read. Imported only where a config file is
read with transformers (models/hf_meta.py), so torch stays out of `import archipelago`."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn


class Unmapped(Exception):
    """A module or parameter ModelSpec cannot hold: the model is refused, never guessed."""


def refuse(path: str, module: nn.Module, why: str) -> Unmapped:
    return Unmapped(f"{path} ({type(module).__name__}) {why}")


def shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    """The module's own parameters (not its children's), name -> shape."""
    return {n: tuple(p.shape) for n, p in module.named_parameters(recurse=False)}


def weighty(module: nn.Module) -> dict[str, nn.Module]:
    """Children holding parameters: dropouts, activations and rotary tables hold none."""
    return {n: c for n, c in module.named_children() if any(True for _ in c.parameters())}


@dataclass(frozen=True)
class Norm:
    kind: str  # "layernorm" | "rmsnorm"
    width: int | None  # None: parameter-free
    bias: bool


def norm(path: str, module: nn.Module) -> Norm:
    """torch's LayerNorm/RMSNorm or a transformers class named *LayerNorm/*RMSNorm holding a
    weight (and, for a LayerNorm, a bias) of one width, or nothing at all (OLMo)."""
    name = type(module).__name__
    kind = ("layernorm" if isinstance(module, nn.LayerNorm) or name.endswith("LayerNorm")
            else "rmsnorm" if isinstance(module, nn.RMSNorm) or name.endswith("RMSNorm")
            else None)
    own = shapes(module)
    if kind is None or list(module.children()) or set(own) - {"weight", "bias"}:
        raise refuse(path, module, "is not a norm read here (LayerNorm or RMSNorm with a "
                     "weight and, for a LayerNorm, a bias)")
    widths = {shape for shape in own.values()}
    if len(widths) > 1 or any(len(s) != 1 for s in widths) or (kind == "rmsnorm" and "bias"
                                                                in own):
        raise refuse(path, module, f"has parameters {own}; read: one weight (and bias) vector")
    if "bias" in own and "weight" not in own:
        raise refuse(path, module, "has a bias without a weight")
    return Norm(kind, own["weight"][0] if own else None, "bias" in own)


def linear(path: str, module: nn.Module) -> tuple[int, int, bool]:
    """(in, out, bias) of an nn.Linear."""
    if not isinstance(module, nn.Linear) or list(module.children()):
        raise refuse(path, module, "is not an nn.Linear, the only projection read here")
    return module.in_features, module.out_features, module.bias is not None


def _only(path: str, module: nn.Module, allowed: set[str], what: str) -> dict[str, nn.Module]:
    """The weighty children, refusing the module's own parameters and any child not allowed."""
    own = shapes(module)
    if own:
        raise refuse(path, module, f"holds its own parameters {sorted(own)}; read: {what}")
    children = weighty(module)
    for name, child in children.items():
        if name not in allowed:
            raise refuse(f"{path}.{name}", child, f"is not read; read: {what}")
    return children


_ATTENTION = "q/k/v/o projections (separate or qkv_proj), q_norm/k_norm, or latent ones"


def attention(path: str, module: nn.Module, config: Any, hidden: int) -> tuple[dict, list]:
    """ModelSpec's attention fields, and the norms inside it (to match the block's kind)."""
    c = _only(path, module, {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_norm",
                             "k_norm", "q_a_proj", "q_a_layernorm", "q_b_proj",
                             "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj"}, _ATTENTION)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(heads, int) or heads <= 0:
        raise refuse(path, module, "has no num_attention_heads in its config to split by")
    if "o_proj" not in c:
        raise refuse(path, module, f"has no o_proj; read: {_ATTENTION}")
    o_in, o_out, o_bias = linear(f"{path}.o_proj", c["o_proj"])
    if "kv_a_proj_with_mqa" in c:
        return _latent(path, module, c, heads, hidden, o_in, o_bias)
    if "qkv_proj" in c:
        width_in, width, bias = linear(f"{path}.qkv_proj", c["qkv_proj"])
        q_out, k_out, biases = o_in, (width - o_in) // 2, {bias}
    else:
        found = [linear(f"{path}.{n}", c[n]) for n in ("q_proj", "k_proj", "v_proj") if n in c]
        if len(found) != 3 or found[1][1] != found[2][1]:
            raise refuse(path, module, f"does not hold q_proj, k_proj and v_proj with k and v "
                         f"of one width; read: {_ATTENTION}")
        width_in, q_out, k_out = found[0][0], found[0][1], found[1][1]
        biases = {b for _, _, b in found}
        width = q_out + 2 * k_out
    head_dim = q_out // heads
    kv_heads = k_out // head_dim if head_dim else 0
    if (q_out != o_in or q_out % heads or not kv_heads or width != q_out + 2 * kv_heads * head_dim
            or heads % kv_heads or o_out != hidden or width_in != hidden
            or getattr(module, "head_dim", head_dim) != head_dim
            or getattr(config, "num_key_value_heads", None) not in (None, kv_heads)):
        raise refuse(path, module, f"projections of widths q {q_out}, k/v {k_out}, o {o_in}->"
                     f"{o_out} do not split into {heads} heads of one head_dim with whole KV "
                     "heads (config num_key_value_heads)")
    if len(biases) > 1:
        raise refuse(path, module, "biases some of q, k, v but not all")
    values: dict[str, Any] = dict(heads=heads, kv_heads=kv_heads, attn_bias=biases.pop(),
                                  head_size=None if q_out == hidden else head_dim)
    if o_bias != values["attn_bias"]:
        values["attn_out_bias"] = o_bias
    norms = _qk_norms(path, c, head_dim, q_out, k_out, values)
    return values, norms


def _qk_norms(path: str, c: Mapping[str, nn.Module], head_dim: int, q_out: int, k_out: int,
              values: dict[str, Any]) -> list[Norm]:
    if "q_norm" not in c and "k_norm" not in c:
        return []
    q, k = (norm(f"{path}.{n}", c[n]) if n in c else None for n in ("q_norm", "k_norm"))
    if q is None or k is None or q.bias != k.bias or (q.width, k.width) not in (
            (head_dim, head_dim), (q_out, k_out)):
        raise refuse(path, c.get("q_norm") or c["k_norm"], "query/key norms are not both per "
                     "head (head_dim wide) or both over the whole width")
    values.update(qk_norm="head" if q.width == head_dim else "width", qk_norm_bias=q.bias)
    return [q, k]


def _latent(path: str, module: nn.Module, c: Mapping[str, nn.Module], heads: int,
            hidden: int, o_in: int, o_bias: bool) -> tuple[dict, list]:
    """DeepSeek's multi-head latent attention (ModelSpec.mla): ranks and head widths from
    the projections' shapes, checked against each other."""
    need = {"kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj"}
    low_rank_q = {"q_a_proj", "q_a_layernorm", "q_b_proj"}
    if not need <= set(c) or not (low_rank_q <= set(c) or "q_proj" in c) or {
            "k_proj", "v_proj", "qkv_proj", "q_norm", "k_norm"} & set(c):
        raise refuse(path, module, "is latent attention without the projections read: "
                     "(q_a_proj, q_a_layernorm, q_b_proj | q_proj), kv_a_proj_with_mqa, "
                     "kv_a_layernorm, kv_b_proj, o_proj")
    kv_in, kv_out, kv_bias = linear(f"{path}.kv_a_proj_with_mqa", c["kv_a_proj_with_mqa"])
    kv_norm = norm(f"{path}.kv_a_layernorm", c["kv_a_layernorm"])
    norms, kv_rank = [kv_norm], kv_norm.width or 0
    b_in, b_out, b_bias = linear(f"{path}.kv_b_proj", c["kv_b_proj"])
    if "q_a_proj" in c:
        qa_in, q_rank, qa_bias = linear(f"{path}.q_a_proj", c["q_a_proj"])
        norms.append(norm(f"{path}.q_a_layernorm", c["q_a_layernorm"]))
        qb_in, q_out, q_bias = linear(f"{path}.q_b_proj", c["q_b_proj"])
        ok = qa_in == hidden and qb_in == q_rank == norms[1].width and qa_bias == kv_bias
    else:
        q_rank, (qb_in, q_out, q_bias) = 0, linear(f"{path}.q_proj", c["q_proj"])
        ok = qb_in == hidden
    qk, rope = q_out // heads, kv_out - kv_rank
    nope, v_dim = qk - rope, b_out // heads - (qk - rope)
    if not (ok and kv_in == hidden and b_in == kv_rank and not q_bias and not b_bias
            and q_out % heads == 0 and b_out % heads == 0 and min(rope, nope, v_dim) > 0
            and o_in == heads * v_dim):
        raise refuse(path, module, f"latent projections (q {q_out}, kv_a {kv_out}, kv_b "
                     f"{b_out}, o {o_in}) do not split into {heads} heads with a shared "
                     "rotary key, biases only on the down projections")
    mla = dict(q_rank=q_rank, kv_rank=kv_rank, rope_dim=rope, nope_dim=nope, v_dim=v_dim)
    values: dict[str, Any] = dict(heads=heads, kv_heads=heads, attn_bias=kv_bias, mla=mla)
    if o_bias != kv_bias:
        values["attn_out_bias"] = o_bias
    return values, norms


_MLP = ("gate_proj/up_proj/down_proj, gate_up_proj/down_proj, or one up projection then "
        "down (up_proj/down_proj, fc1/fc2, c_fc/c_proj)")


def mlp(path: str, module: nn.Module, hidden: int) -> tuple[int, bool, bool]:
    """A dense MLP's (width, gated, bias): a gate beside the up projection (or fused with
    it as gate_up_proj), or one up projection, then down."""
    c = _only(path, module, {"gate_proj", "up_proj", "down_proj", "gate_up_proj", "fc1",
                             "fc2", "c_fc", "c_proj"}, _MLP)
    down = c.get("down_proj", c.get("fc2", c.get("c_proj")))
    up = c.get("up_proj", c.get("fc1", c.get("c_fc")))
    layouts = ({"gate_proj", "up_proj", "down_proj"}, {"gate_up_proj", "down_proj"},
               {"up_proj", "down_proj"}, {"fc1", "fc2"}, {"c_fc", "c_proj"})
    if set(c) not in layouts or down is None:
        raise refuse(path, module, f"holds {sorted(c)}; read: {_MLP}")
    d_in, d_out, d_bias = linear(f"{path}.down_proj", down)
    if "gate_up_proj" in c:
        u_in, u_out, u_bias = linear(f"{path}.gate_up_proj", c["gate_up_proj"])
        u_out, gated = u_out // 2 if u_out == 2 * d_in else -1, True
    else:
        u_in, u_out, u_bias = linear(f"{path}.up_proj", up)  # type: ignore[arg-type]
        gated = "gate_proj" in c
        if gated and linear(f"{path}.gate_proj", c["gate_proj"]) != (u_in, u_out, u_bias):
            raise refuse(path, module, "gate_proj and up_proj differ in shape or bias")
    if u_in != hidden or d_out != hidden or u_out != d_in or u_bias != d_bias:
        raise refuse(path, module, f"projections {hidden}->{u_out}->{d_out} (down from "
                     f"{d_in}) or their biases do not chain")
    return d_in, gated, d_bias


_MOE = ("a router (gate/router: one weight, experts x hidden), experts fused as 3-D "
        "gate_up_proj/down_proj or gate_proj/up_proj/down_proj without biases, "
        "shared_expert(s) and shared_expert_gate")


def experts(path: str, module: nn.Module, config: Any, hidden: int) -> dict[str, Any]:
    """A mixture of experts (ModelSpec.moe)."""
    c = _only(path, module, {"gate", "router", "experts", "shared_expert", "shared_experts",
                             "shared_expert_gate"}, _MOE)
    routers = [n for n in ("gate", "router") if n in c]
    if len(routers) != 1:
        raise refuse(path, module, f"has no single router; read: {_MOE}")
    router = c[routers[0]]
    if list(weighty(router)) or set(shapes(router)) != {"weight"}:
        raise refuse(f"{path}.{routers[0]}", router, f"holds {sorted(shapes(router))} and "
                     f"{sorted(weighty(router))}; read: a router of one weight (no bias)")
    count, width_in = shapes(router)["weight"]
    e = c["experts"]
    own, children = shapes(e), weighty(e)
    if children or set(own) not in ({"gate_up_proj", "down_proj"},
                                    {"gate_proj", "up_proj", "down_proj"}):
        raise refuse(f"{path}.experts", e, f"holds {sorted(own) or sorted(children)}; read: "
                     "experts fused as 3-D gate_up_proj/down_proj (or gate/up/down) weights, "
                     "no biases")
    down = own["down_proj"]
    width = down[2] if down[1] == hidden else down[1]
    fused_width = 2 * width if "gate_up_proj" in own else width
    ups = [own[n] for n in ("gate_up_proj", "gate_proj", "up_proj") if n in own]
    if (width_in != hidden or sorted(down) != sorted((count, hidden, width))
            or down[0] != count or any(sorted(s) != sorted((count, hidden, fused_width))
                                       or s[0] != count for s in ups)):
        raise refuse(f"{path}.experts", e, f"shapes {own} do not hold {count} experts of "
                     f"width {width} over hidden {hidden}")
    top_k = next((k for k in (getattr(router, "top_k", None), getattr(module, "top_k", None),
                              getattr(config, "num_experts_per_tok", None))
                  if isinstance(k, int)), None)
    if top_k is None or not 0 < top_k <= count:
        raise refuse(path, module, f"routes to {top_k!r} experts per token (router top_k, "
                     f"config num_experts_per_tok) of {count}")
    moe: dict[str, Any] = dict(experts=count, per_token=top_k, expert_ffn=width)
    shared = [n for n in ("shared_expert", "shared_experts") if n in c]
    if shared:
        s_width, gated, bias = mlp(f"{path}.{shared[0]}", c[shared[0]], hidden)
        if not gated or bias:
            raise refuse(f"{path}.{shared[0]}", c[shared[0]], "is not a gated MLP without "
                         "biases, the shared experts read")
        moe["shared_ffn"] = s_width
    if "shared_expert_gate" in c:
        if linear(f"{path}.shared_expert_gate", c["shared_expert_gate"]) != (hidden, 1, False):
            raise refuse(f"{path}.shared_expert_gate", c["shared_expert_gate"], "is not a "
                         "hidden -> 1 gate without a bias")
        moe["shared_gate"] = True
    return moe
