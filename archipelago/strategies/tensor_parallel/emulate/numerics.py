"""Numerical details a ModelSpec leaves out but the arithmetic needs: norm epsilon and rotary
base, rotary pairing and an MoE router's options, read from the Hugging Face config with the
defaults its family declares (`ModelFamily.numerics`, models/hf_families/). Config options
that change the arithmetic in ways the emulator does not model are refused."""

from dataclasses import dataclass, field
from typing import Any

from archipelago.emulate.errors import EmulationError
from archipelago.models.model_families import FamilyNumerics, get_model_family, model_families
from archipelago.models.spec import ModelSpec


@dataclass(frozen=True)
class Numerics:
    norm_eps: float
    rope_theta: float | None  # rotary position embedding base; None: learned positions
    rope_interleaved: bool = False  # rotary pairs (x0, x1), (x2, x3), ... (DeepSeek)
    routing: dict[str, Any] = field(default_factory=dict)  # empty: softmax top-k (Mixtral)


def _declared(spec: ModelSpec) -> FamilyNumerics:
    declared = get_model_family(spec.arch).numerics
    if declared is None:
        emulated = sorted(arch for arch, family in model_families().items() if family.numerics)
        raise EmulationError(f"{spec.name}: architecture '{spec.arch}' is not emulated "
                             f"({', '.join(emulated)} are)")
    return declared


def numerics(spec: ModelSpec) -> Numerics:
    cfg, declared = spec.hf_config, _declared(spec)
    for key, option in declared.fixed.items():
        within = (cfg.get(option.within) or {}) if option.within else cfg
        value = within.get(key, option.default)
        if value != option.value:
            raise EmulationError(f"{spec.name}: config {key}={value!r} is not emulated "
                                 f"(only {option.value!r})")
    key = declared.norm_eps_key
    eps = float(cfg.get(key, declared.norm_eps) if key else declared.norm_eps)
    routing = {k: cfg.get(k, default) for k, default in declared.routing.items()}
    if declared.rope_theta is None:
        return Numerics(eps, None, routing=routing)
    rope = cfg.get("rope_parameters") or {}  # transformers 5 nests it; older configs do not
    theta = float(rope.get("rope_theta", cfg.get("rope_theta", declared.rope_theta)))
    return Numerics(eps, theta, declared.rope_interleaved, routing)
