"""The Cluster Builder's model file system (seeds/000 §6.1): every parameter a kernel
needs, extracted once from a calibrated I-BERT model into plain tensors, so kernels never
touch the transformers modules. Weights are quantized per output channel here, as the
I-BERT software does it, to the integers the kernels hold on chip."""

from dataclasses import dataclass

import torch

from archipelago.strategies.galapagos.emulate.ibert import quantize, symmetric_scale


@dataclass(frozen=True)
class LinearParams:
    """int8 weights (out, in), int32 bias and the bias scale (weight scale x input scale)."""

    weight: torch.Tensor
    bias: torch.Tensor
    scale: torch.Tensor

    def rows(self, lo: int, hi: int) -> "LinearParams":
        """The output channels [lo, hi) of a column-split kernel."""
        return LinearParams(self.weight[lo:hi], self.bias[lo:hi], self.scale[lo:hi])


@dataclass(frozen=True)
class NormParams:
    weight: torch.Tensor
    bias: torch.Tensor
    shift: torch.Tensor


@dataclass(frozen=True)
class LayerParams:
    """One encoder. `in_scale` is the scale of the int8 rows that arrive (the previous
    encoder's output scale); `arith_scale` the one transformers' IBertEncoder divides them
    by: it passes the embedding's scale to every layer, so the two differ after layer 0
    and the emulation must do as it does to stay bit-identical."""

    in_scale: torch.Tensor
    arith_scale: torch.Tensor
    q: LinearParams
    k: LinearParams
    v: LinearParams
    q_scale: torch.Tensor
    k_scale: torch.Tensor
    v_scale: torch.Tensor
    exp_low: torch.Tensor
    exp_high: torch.Tensor
    context_scale: torch.Tensor
    attn_out: LinearParams
    ln1_in_scale: torch.Tensor
    ln1: NormParams
    ln1_out_scale: torch.Tensor
    ffn_in_scale: torch.Tensor
    ffn_up: LinearParams
    gelu_out_scale: torch.Tensor
    ffn_down_in_scale: torch.Tensor
    ffn_down: LinearParams
    ln2_in_scale: torch.Tensor
    ln2: NormParams
    out_scale: torch.Tensor


def act_scale(act: torch.nn.Module) -> torch.Tensor:
    """A calibrated QuantAct's scale: its running range over 2^(bits-1) - 1."""
    return symmetric_scale(act.x_min, act.x_max, act.activation_bit)


def linear_params(linear: torch.nn.Module, input_scale: torch.Tensor) -> LinearParams:
    w = linear.weight.detach()
    w_scale = symmetric_scale(w.min(dim=1).values, w.max(dim=1).values, linear.weight_bit)
    bias_scale = w_scale * input_scale
    return LinearParams(quantize(w, w_scale, linear.weight_bit),
                        quantize(linear.bias.detach(), bias_scale, linear.bias_bit), bias_scale)


def _norm(ln: torch.nn.Module) -> NormParams:
    return NormParams(ln.weight.detach(), ln.bias.detach(), ln.shift.detach().clone())


def layer_params(layer: torch.nn.Module, in_scale: torch.Tensor,
                 arith_scale: torch.Tensor) -> LayerParams:
    """Parameters of one transformers IBertLayer (quant_mode, calibrated, eval)."""
    att, out = layer.attention.self, layer.attention.output
    mid, ffn = layer.intermediate, layer.output
    context_scale = act_scale(att.output_activation)
    ffn_in = act_scale(layer.pre_intermediate_act)
    ffn_down_in = act_scale(layer.pre_output_act)
    return LayerParams(
        in_scale=in_scale, arith_scale=arith_scale,
        q=linear_params(att.query, arith_scale), k=linear_params(att.key, arith_scale),
        v=linear_params(att.value, arith_scale),
        q_scale=act_scale(att.query_activation), k_scale=act_scale(att.key_activation),
        v_scale=act_scale(att.value_activation),
        exp_low=att.softmax.act.x_min.detach(), exp_high=att.softmax.act.x_max.detach(),
        context_scale=context_scale,
        attn_out=linear_params(out.dense, context_scale),
        ln1_in_scale=act_scale(out.ln_input_act), ln1=_norm(out.LayerNorm),
        ln1_out_scale=act_scale(out.output_activation), ffn_in_scale=ffn_in,
        ffn_up=linear_params(mid.dense, ffn_in), gelu_out_scale=act_scale(mid.output_activation),
        ffn_down_in_scale=ffn_down_in, ffn_down=linear_params(ffn.dense, ffn_down_in),
        ln2_in_scale=act_scale(ffn.ln_input_act), ln2=_norm(ffn.LayerNorm),
        out_scale=act_scale(ffn.output_activation),
    )


def model_params(model: torch.nn.Module, embed_scale: torch.Tensor) -> list[LayerParams]:
    """Every encoder's parameters; each layer's rows arrive at the previous one's scale."""
    layers, in_scale = [], embed_scale
    for layer in model.encoder.layer:
        params = layer_params(layer, in_scale, embed_scale)
        layers.append(params)
        in_scale = params.out_scale
    return layers
