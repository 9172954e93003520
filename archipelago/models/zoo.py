"""Named built-in models, and the one resolver that also accepts a local config.json path."""

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from archipelago.errors import UnknownNameError
from archipelago.models.dag import ModelDAG, load_dag
from archipelago.models.dag_zoo import BUILTIN_DAGS, builtin_dag
from archipelago.models.hf_config import spec_from_config_file, spec_from_hf_config
from archipelago.models.recurrent import RecurrentSpec, build_recurrent, recurrent_names
from archipelago.models.spec import ModelSpec
from archipelago.safe_read import probe


@cache
def zoo_configs() -> dict[str, dict[str, Any]]:
    """The built-in configs, keyed by name (HF config.json field names)."""
    text = resources.files("archipelago.models").joinpath("zoo.yaml").read_text()
    return yaml.safe_load(text)


def model_names() -> list[str]:
    return sorted(zoo_configs())


def resolve_model(name_or_path: str) -> ModelSpec | RecurrentSpec | ModelDAG:
    """A zoo name, a recurrent built-in (at its default size; a strategy for recurrent
    models resizes it), a layer-DAG built-in or YAML file (seeds/004 MMMT models), or a
    path to a local config.json / checkpoint directory (never a download)."""
    configs = zoo_configs()
    if name_or_path in recurrent_names():
        return build_recurrent(name_or_path)
    if name_or_path in BUILTIN_DAGS:
        return builtin_dag(name_or_path)
    if Path(name_or_path).suffix in {".yaml", ".yml"}:
        return load_dag(Path(name_or_path))
    if Path(name_or_path).suffix == ".onnx":
        from archipelago.models.onnx_import import dag_from_onnx

        return dag_from_onnx(Path(name_or_path))
    if name_or_path in configs:
        return spec_from_hf_config(configs[name_or_path], name=name_or_path, source="zoo.yaml")
    path = Path(name_or_path)
    # an empty name is no path: Path("") is the working directory
    if name_or_path.strip() and (probe(path, "model") is not None or path.suffix == ".json"):
        return spec_from_config_file(path)
    raise UnknownNameError("model", name_or_path,
                           [*configs, *recurrent_names(), *BUILTIN_DAGS,
                            "<path to config.json>", "<layer-DAG YAML>", "<model.onnx>"])
