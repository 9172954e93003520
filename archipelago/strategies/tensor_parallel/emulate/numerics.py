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


def _rope_theta(spec: ModelSpec, cfg: Mapping[str, Any]) -> float:
    rope = cfg.get("rope_parameters") or {}  # transformers 5 nests it; older configs do not
    _refuse(spec, rope, "rope_type", "default", "default")
    _refuse(spec, cfg, "rope_scaling", None, None)
    _refuse(spec, cfg, "head_dim", spec.head_dim, spec.head_dim)
    return float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def numerics(spec: ModelSpec) -> Numerics:
    cfg = spec.hf_config
    if spec.arch == "gpt2":
        _refuse(spec, cfg, "scale_attn_weights", True, True)
        _refuse(spec, cfg, "scale_attn_by_inverse_layer_idx", False, False)
        return Numerics(float(cfg.get("layer_norm_epsilon", 1e-5)), None)
    if spec.arch == "opt":
        _refuse(spec, cfg, "layer_norm_elementwise_affine", True, True)
        return Numerics(1e-5, None)  # OPT uses nn.LayerNorm's default epsilon
    if spec.arch == "llama":
        return Numerics(float(cfg.get("rms_norm_eps", 1e-6)), _rope_theta(spec, cfg))
    raise EmulationError(f"{spec.name}: architecture '{spec.arch}' is not emulated "
                         "(gpt2, opt, llama are)")
