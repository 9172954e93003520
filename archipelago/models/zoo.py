"""The transformer zoo (zoo.yaml), and `resolve_model`: the loop over every model family.

Importing this module registers the built-in model families, each in the module that owns
its form, tried in this order: zoo names, recurrent built-ins, layer-DAG built-ins (disjoint
name sets, none with a file suffix, so their order among themselves is immaterial), then
layer-DAG YAML, a torch.export program (.pt2), ONNX, and last any local config.json /
checkpoint directory.
"""

from functools import cache, lru_cache
from importlib import resources
from typing import Any

from archipelago.families import CatalogTable, Family, register_family, resolve
from archipelago.models import (  # noqa: F401 (their register_family calls)
    dag_zoo,
    onnx_import,
    torch_export,
)
from archipelago.models.dag import ModelDAG
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.recurrent import RecurrentSpec
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.yaml_loader import load_packaged


@cache
def zoo_configs() -> dict[str, dict[str, Any]]:
    """The built-in configs, keyed by name (HF config.json field names)."""
    text = resources.files("archipelago.models").joinpath("zoo.yaml").read_text()
    return load_packaged(text)


def model_names() -> list[str]:
    return sorted(zoo_configs())


# zoo.yaml is package data, read once above; a spec is frozen, so callers may share one.
@lru_cache(maxsize=64)
def zoo_model(name: str) -> ModelSpec:
    return spec_from_hf_config(zoo_configs()[name], name=name, source="zoo.yaml")


def resolve_model(name_or_path: str) -> ModelSpec | RecurrentSpec | ModelDAG:
    """What `name_or_path` names, by the first model family that recognizes it (never a
    download); an unknown name is one line listing every family's choices."""
    return resolve("model", name_or_path)


def _catalog() -> CatalogTable:
    specs = {name: zoo_model(name) for name in model_names()}
    return CatalogTable(
        "models", "models", ("name", "arch", "layers", "hidden", "heads", "ffn", "parameters"),
        {name: (s.arch, str(s.layers), str(s.hidden), str(s.heads), str(s.ffn),
                f"{parameter_count(s) / 1e6:,.0f} M") for name, s in specs.items()},
        json_rows={name: {"arch": s.arch, "layers": s.layers, "hidden": s.hidden,
                          "heads": s.heads, "parameters": parameter_count(s)}
                   for name, s in specs.items()})


register_family(Family("transformer-zoo", "model", matches=lambda text: text in zoo_configs(),
                       load=zoo_model, choices=lambda: list(zoo_configs()), catalog=_catalog,
                       order=10))
