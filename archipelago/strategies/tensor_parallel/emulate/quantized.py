"""W8A8 (SmoothQuant-O3) weights for emulating LORA-Q plans (seeds/002 §IV-B-c, Fig. 1d).

Done once, before any rank starts (or identically on every torchrun node): a calibration
forward of the fp32 model on a seeded prompt records the inputs of every block matrix;
SmoothQuant factors fold into the LayerNorms that feed Q/K/V and the FFN (an exact
reparametrization in real arithmetic, so the smoothed checkpoint still serves as the fp32
reference); a second forward records the smoothed inputs; per-tensor static scales for
weights and inputs go beside the checkpoint. Ranks then quantize only their own slices with
those global scales, so a slice is bit-for-bit the matching part of the unsplit int8 matrix.
"""

import json
from pathlib import Path

import torch

from archipelago.models.hf_state_dict import hf_source
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, layer_weights
from archipelago.strategies.tensor_parallel.emulate.w8a8 import scale_for, smoothing_factors

SCALES_FILE = "w8a8_scales.json"
CALIBRATION_TOKENS = 32
CALIBRATION_SEED_OFFSET = 0x5EED  # a prompt stream apart from the generation prompt's
# Block matrices run in int8; the LayerNorm before each group absorbs its smoothing.
QUANTIZED = frozenset({"q", "k", "v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"})
SMOOTHED_BY = {"attn_norm": ("q", "k", "v"), "ffn_norm": ("ffn_gate", "ffn_up")}


def _module(spec: ModelSpec, tensor: WeightTensor) -> str:
    return hf_source(spec, tensor).key.rsplit(".", 1)[0]


def _canonical(model: torch.nn.Module, spec: ModelSpec, tensor: WeightTensor) -> torch.Tensor:
    """`tensor` as an (in, out) view of the model's parameter (one block of a fused one)."""
    source = hf_source(spec, tensor)
    param = model.get_parameter(source.key)
    full = param.T if source.transposed else param
    width = tensor.shape[-1]
    return full[:, source.part * width:(source.part + 1) * width]


def _inputs_of(model: torch.nn.Module, modules: set[str], ids: torch.Tensor
               ) -> dict[str, torch.Tensor]:
    """Each module's input over the calibration prompt, as (tokens, features)."""
    seen: dict[str, torch.Tensor] = {}
    hooks = [model.get_submodule(path).register_forward_pre_hook(
        lambda _m, args, path=path: seen.__setitem__(path, args[0].reshape(-1, args[0].shape[-1])))
        for path in modules]
    try:
        with torch.inference_mode():
            model(ids[None, :])
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def _smooth(model: torch.nn.Module, spec: ModelSpec, layer: dict[str, WeightTensor],
            inputs: dict[str, torch.Tensor]) -> None:
    """Divide each feeding LayerNorm by s and multiply its consumers' input rows by s."""
    for norm, consumers in SMOOTHED_BY.items():
        mats = [layer[f"{c}.weight"] for c in consumers if f"{c}.weight" in layer]
        act = inputs[_module(spec, mats[0])].abs().amax(dim=0)
        s = smoothing_factors(act, [_canonical(model, spec, m) for m in mats])
        with torch.no_grad():
            for part in ("weight", "bias"):
                if f"{norm}.{part}" in layer:
                    model.get_parameter(hf_source(spec, layer[f"{norm}.{part}"]).key).div_(s)
            for key in {hf_source(spec, m).key for m in mats}:
                param = model.get_parameter(key)
                param.mul_(s[None, :] if hf_source(spec, mats[0]).transposed else s[:, None])


def prepare_w8a8(spec: ModelSpec, source: Path, out: Path, seed: int) -> Path:
    """Write the smoothed checkpoint and its scales to `out`; returns `out`."""
    from archipelago.strategies.tensor_parallel.emulate import reference

    model = reference.load_model(source).requires_grad_(False)
    generator = torch.Generator().manual_seed(seed + CALIBRATION_SEED_OFFSET)
    ids = torch.randint(spec.vocab, (CALIBRATION_TOKENS,), generator=generator)
    layers = [{t.role: t for t in layer_weights(spec, i)} for i in range(spec.layers)]
    matrices = [t for layer in layers for t in layer.values()
                if t.role.endswith(".weight") and t.role.split(".")[0] in QUANTIZED]
    modules = {_module(spec, t) for t in matrices}
    before = _inputs_of(model, modules, ids)
    for layer in layers:
        _smooth(model, spec, layer, before)
    after = _inputs_of(model, modules, ids)
    scales = {t.name: [scale_for(_canonical(model, spec, t).abs().max()),
                       scale_for(after[_module(spec, t)].abs().max())] for t in matrices}
    reference.save_model(model, out)
    (out / SCALES_FILE).write_text(json.dumps(scales, indent=1))
    return out


def read_scales(directory: Path) -> dict[str, tuple[float, float]]:
    """Canonical weight name -> (weight scale, input scale)."""
    return {k: (w, x) for k, (w, x) in json.loads((directory / SCALES_FILE).read_text()).items()}

