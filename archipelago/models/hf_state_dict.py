"""Canonical tensor names (models/weights.py) -> transformers state-dict names and layouts,
from each family's `StateDictNames` (models/hf_families/): what any kind reading or writing
a Hugging Face checkpoint looks tensors up by.

Canonical matrices are (in_features, out_features). GPT-2's Conv1D stores that layout
already; nn.Linear stores (out_features, in_features), so those matrices are read
transposed. Experts stored one matrix per expert are read into one (experts, in, out) stack.
"""

from dataclasses import dataclass

from archipelago.models.model_families import StateDictNames, get_model_family, model_families
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor


@dataclass(frozen=True)
class HFSource:
    """Where a canonical tensor lives: `key` in the state dict, stored transposed or not, and
    for a fused matrix which of `parts` equal blocks along the output axis it is."""

    key: str
    transposed: bool = False
    part: int = 0
    parts: int = 1
    experts: int = 0  # > 0: `key` has a '{}' for the expert index, one 2-D matrix each


# Lookup tables are (rows, width) in both layouts; every other matrix is a linear map.
_TABLES = frozenset({"embed_tokens", "embed_positions"})


def named_archs() -> list[str]:
    """The architectures whose state-dict names are known, sorted."""
    return sorted(arch for arch, family in model_families().items() if family.names)


def state_dict_names(spec: ModelSpec) -> StateDictNames | None:
    return get_model_family(spec.arch).names


def hf_source(spec: ModelSpec, tensor: WeightTensor) -> HFSource:
    """The state-dict entry holding `tensor` (KeyError for an architecture or module that has
    no mapping: callers check `named_archs()` and the spec first)."""
    names = state_dict_names(spec)
    if names is None:
        raise KeyError(spec.arch)
    module, param = tensor.role.rsplit(".", 1)
    if tensor.layer is None:
        path = names.other[module]
    else:
        path = names.layer_prefix.format(tensor.layer) + names.layer[module]
    transposed = names.linear_transposed and len(tensor.shape) >= 2 and module not in _TABLES
    part, parts = names.fused.get(module, (0, 1))
    experts = tensor.shape[0] if module in names.experts else 0
    return HFSource(f"{path}.{param}", transposed, part, parts, experts)
