"""Transformer families by architecture (`ModelSpec.arch`, a transformers `model_type`): the
one registry every list of architectures is derived from.

A family is one module of `archipelago.models.hf_families` (or any module imported before
the family is named: a plugin, a test) that calls `register_model_family` with its config
reader, the features its models may use, where transformers keeps its tensors
(`StateDictNames`, for the kinds that load checkpoints) and the numerical details of its
arithmetic that ModelSpec leaves out (`FamilyNumerics`, for the kinds that compute values).
The built-in modules are imported the first time the registry is asked.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from pkgutil import iter_modules
from typing import Any

from archipelago import refs
from archipelago.errors import UnknownNameError
from archipelago.models.features import Feature
from archipelago.models.hf_fields import Fields

_BUILTIN = "archipelago.models.hf_families"
Reader = Callable[[Fields], dict[str, Any]]


@dataclass(frozen=True)
class StateDictNames:
    """Where transformers keeps a family's tensors: canonical module (models/weights.py) ->
    state-dict path, in one layer (`layer_prefix` formatted with its index) or outside."""

    layer_prefix: str
    layer: Mapping[str, str]
    other: Mapping[str, str]
    linear_transposed: bool      # nn.Linear (out, in) rather than Conv1D (in, out)
    fused: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # (block, blocks)
    experts: frozenset[str] = frozenset()  # modules stored one matrix per expert


@dataclass(frozen=True)
class FixedOption:
    """A config option whose other values change the arithmetic in ways no kind models:
    `value`, the only one computed; `default`, transformers' where the config leaves it
    out; `within`, the config object holding it (transformers 5's rope_parameters), or ""
    at the top level."""

    value: Any
    default: Any
    within: str = ""


@dataclass(frozen=True)
class FamilyNumerics:
    """What a family's arithmetic needs beyond ModelSpec's sizes: the norm epsilon (read
    from config key `norm_eps_key`, `norm_eps` where absent, or always `norm_eps` where the
    key is None), the rotary base's transformers default (None: learned positions), the
    options that must hold one value (config key -> FixedOption), checked in order, whether
    rotary pairs are interleaved (DeepSeek's rope_interleave) rather than halves, and an
    MoE router's options with their transformers defaults (config key -> default): empty
    for Mixtral's softmax top-k, DeepSeek's group-limited sigmoid router otherwise."""

    norm_eps: float
    norm_eps_key: str | None
    rope_theta: float | None = None
    fixed: Mapping[str, FixedOption] = field(default_factory=dict)
    rope_interleaved: bool = False
    routing: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelFamily:
    """`arch`: the model_type it reads; `reader`: config fields -> ModelSpec fields;
    `features`: those its models may use (a spec's own are `ModelSpec.features`);
    `inherent`: features every model of the family has that no ModelSpec field says (a
    family bringing a structure of its own); `checked`: config fields transformers builds
    from, validated by kind ("positive", "std", "probability", "bool"), and `checked_within`
    the numbers inside a config object (object field -> its fields, likewise); `names`: its
    state-dict layout, None where no kind reads its checkpoints yet; `numerics`: its
    arithmetic's details, None where no kind computes its values yet;
    `offset_in_positions`: its learned-position table's max_position_embeddings rows hold
    the position offset (RoBERTa's padding index) rather than come after it (OPT)."""

    arch: str
    reader: Reader
    decoder: bool
    features: frozenset[Feature]
    inherent: frozenset[Feature] = frozenset()
    checked: Mapping[str, str] = field(default_factory=dict)
    checked_within: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    names: StateDictNames | None = None
    numerics: FamilyNumerics | None = None
    offset_in_positions: bool = False


_FAMILIES: dict[str, ModelFamily] = {}
_loaded = False


def register_model_family(family: ModelFamily) -> ModelFamily:
    if family.arch in _FAMILIES and _FAMILIES[family.arch] != family:
        raise ValueError(f"model family '{family.arch}' registered twice")
    if not family.inherent <= family.features:
        raise ValueError(f"model family '{family.arch}': inherent features must be declared")
    _FAMILIES[family.arch] = family
    return family


def unregister_model_family(arch: str) -> None:
    """Drop family `arch` (a test's toy family, once the test is done)."""
    _FAMILIES.pop(arch, None)


def model_families() -> dict[str, ModelFamily]:
    _load()
    return dict(_FAMILIES)


def get_model_family(arch: str) -> ModelFamily:
    _load()
    if arch not in _FAMILIES:
        raise UnknownNameError("architecture", arch, _FAMILIES)
    return _FAMILIES[arch]


# Registers a family read from transformers' model, for a spec made in another process.
_READ_LATER = "archipelago.models.hf_config:register_read_family"


def ensure_family(arch: str, config: Mapping[str, Any]) -> None:
    """A spec sent from another process (a Dask worker's task) may name a family that
    process registered when it read the config file: this process registers it the same
    way (no-op for a family it knows)."""
    _load()
    if arch not in _FAMILIES and config.get("model_type") == arch:
        refs.resolve(_READ_LATER)(arch)


def _load() -> None:
    """Import the built-in family modules, once."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    package = import_module(_BUILTIN)
    for module in iter_modules(package.__path__):
        import_module(f"{_BUILTIN}.{module.name}")
