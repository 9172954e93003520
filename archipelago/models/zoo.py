"""The transformer zoo (zoo.yaml), and `resolve_model`: the loop over every model family.

Importing this module registers the built-in model families, tried in this order: zoo
names, recurrent built-ins, layer-DAG built-ins (disjoint name sets, none with a file
suffix, so their order among themselves is immaterial), then layer-DAG YAML, a torch.export
program (.pt2), ONNX, and last any local config.json / checkpoint directory (registered in
hf_config.py). Each form's code is named by path and imported only once a name is of that
form (or `archi catalog` lists it): planning a zoo model imports none of the others.
"""

from collections.abc import Callable
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archipelago import refs
from archipelago.families import CatalogTable, Family, register_family, resolve
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.yaml_loader import load_packaged

if TYPE_CHECKING:  # imported by their families when a name is of their form
    from archipelago.models.dag import ModelDAG
    from archipelago.models.recurrent import RecurrentSpec


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
    return spec_from_hf_config(zoo_configs()[name], name=name, source="zoo.yaml", verify=False)


def resolve_model(name_or_path: str) -> "ModelSpec | RecurrentSpec | ModelDAG":
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


def _on_file(path: str) -> Callable[[str], Any]:
    """The loader at `module:attribute` of a file form, called with the name as a Path."""
    return lambda text: refs.resolve(path)(Path(text))


_M = "archipelago.models"
_DAGS = f"{_M}.dag_zoo:BUILTIN_DAGS"
# A recurrent built-in resolves at its default size; a strategy for recurrent models resizes it.
register_family(Family("recurrent", "model",
                       matches=lambda text: text in refs.lazy(f"{_M}.recurrent:recurrent_names")(),
                       load=refs.lazy(f"{_M}.recurrent:build_recurrent"),
                       choices=refs.lazy(f"{_M}.recurrent:recurrent_names"),
                       catalog=refs.lazy(f"{_M}.recurrent:catalog_table"), order=20))
register_family(Family("layer-dag", "model", matches=lambda text: text in refs.resolve(_DAGS),
                       load=refs.lazy(f"{_M}.dag_zoo:builtin_dag"),
                       choices=lambda: list(refs.resolve(_DAGS)),
                       catalog=refs.lazy(f"{_M}.dag_zoo:catalog_table"), order=30))
register_family(Family("layer-dag-yaml", "model",
                       matches=lambda text: Path(text).suffix in {".yaml", ".yml"},
                       load=_on_file(f"{_M}.dag:load_dag"),
                       choices=lambda: ("<layer-DAG YAML>",), order=40))
# Before the catch-all family of config.json paths, which accepts any existing file.
register_family(Family("torch-export", "model",
                       matches=lambda text: Path(text).suffix == ".pt2",  # torch.export.save's
                       load=_on_file(f"{_M}.torch_export:dag_from_exported"),
                       choices=lambda: ["<model.pt2 from torch.export.save>"], order=45))
# onnx itself is imported only when a file is loaded (`dag_from_onnx`).
register_family(Family("onnx", "model", matches=lambda text: Path(text).suffix == ".onnx",
                       load=_on_file(f"{_M}.onnx_import:dag_from_onnx"),
                       choices=lambda: ("<model.onnx>",), order=50))
