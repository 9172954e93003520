"""Numerical details a ModelSpec leaves out but the arithmetic needs: norm epsilon and rotary
base, read from the Hugging Face config with each architecture's transformers defaults.
Config options that change the arithmetic in ways the emulator does not model are refused."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from archipelago.emulate.errors import EmulationError
from archipelago.models.spec import ModelSpec


@dataclass(frozen=True)
class Numerics:
    norm_eps: float
    rope_theta: float | None  # rotary position embedding base; None: learned positions


def _refuse(spec: ModelSpec, cfg: Mapping[str, Any], key: str, wanted: Any, default: Any) -> None:
    value = cfg.get(key, default)
    if value != wanted:
        raise EmulationError(f"{spec.name}: config {key}={value!r} is not emulated "
                             f"(only {wanted!r})")


# Rotary decoders: transformers' defaults of (rms_norm_eps, rope_theta) where a config
# leaves them out (each family's configuration_*.py, transformers 5).
_ROTARY_DEFAULTS = {"llama": (1e-6, 10000.0), "mistral": (1e-6, 10000.0),
                    "mixtral": (1e-5, 1e6), "qwen2": (1e-6, 10000.0), "qwen3": (1e-6, 10000.0)}


def _rope_theta(spec: ModelSpec, cfg: Mapping[str, Any], default: float) -> float:
    rope = cfg.get("rope_parameters") or {}  # transformers 5 nests it; older configs do not
    _refuse(spec, rope, "rope_type", "default", "default")
    _refuse(spec, cfg, "rope_scaling", None, None)
    _refuse(spec, cfg, "partial_rotary_factor", 1.0, 1.0)
    return float(rope.get("rope_theta", cfg.get("rope_theta", default)))


def numerics(spec: ModelSpec) -> Numerics:
    cfg = spec.hf_config
    if spec.arch == "gpt2":
        _refuse(spec, cfg, "scale_attn_weights", True, True)
        _refuse(spec, cfg, "scale_attn_by_inverse_layer_idx", False, False)
        return Numerics(float(cfg.get("layer_norm_epsilon", 1e-5)), None)
    if spec.arch == "opt":
        _refuse(spec, cfg, "layer_norm_elementwise_affine", True, True)
        return Numerics(1e-5, None)  # OPT uses nn.LayerNorm's default epsilon
    if spec.arch in _ROTARY_DEFAULTS:
        eps, theta = _ROTARY_DEFAULTS[spec.arch]
        return Numerics(float(cfg.get("rms_norm_eps", eps)), _rope_theta(spec, cfg, theta))
    raise EmulationError(f"{spec.name}: architecture '{spec.arch}' is not emulated "
                         f"(gpt2, opt, {', '.join(_ROTARY_DEFAULTS)} are)")
