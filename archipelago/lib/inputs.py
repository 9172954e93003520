"""Models and clusters as a Python caller gives them: a name (`gpt2-1.5b`, `4xu280`), a
path (a config.json, a layer-DAG or cluster YAML, an ONNX or `.pt2` file), or a mapping
(the content of such a file). The pipeline resolves names through the model and cluster
families (families.py), so a mapping is written into the call's scratch directory as the
file it is the content of, and named by that file: one loader, whatever the form.

Every call runs inside its own scratch directory (scratch.owned_scratch), as a command
does, so nothing it writes for itself outlives it."""

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from archipelago.errors import ArchipelagoError, elide
from archipelago.scratch import owned_scratch

ModelInput = str | Path | Mapping[str, Any]
ClusterInput = str | Path | Mapping[str, Any] | None


def _written(folder: Path, what: str, content: Mapping[str, Any]) -> str:
    """The file a mapping is the content of: a transformers config (it says its
    `model_type`) as `config.json` in a folder named after it, any other model as a
    layer-DAG YAML, a cluster as a cluster YAML. The model is named after the config's
    `_name_or_path` (its last part), else its `model_type`."""
    if what == "model" and "model_type" in content:
        given = str(content.get("_name_or_path") or content["model_type"]).rstrip("/")
        named = folder / (re.sub(r"[^A-Za-z0-9._-]+", "-", given.rsplit("/", 1)[-1])
                          .strip(".-")[:80] or "model")  # the spec's name: its folder's
        named.mkdir(parents=True, exist_ok=True)
        path = named / "config.json"
        path.write_text(json.dumps(dict(content)))
    else:
        path = folder / f"{what}.yaml"
        path.write_text(yaml.safe_dump(dict(content), sort_keys=False))
    return str(path)


def _name(folder: Path, what: str, given: Any) -> str | None:
    if given is None or isinstance(given, str):
        return given
    if isinstance(given, Path):
        return str(given)
    if isinstance(given, Mapping):
        return _written(folder / what, what, given)
    raise ArchipelagoError(f"{what}={elide(repr(given), 60)}: give a name, a path or a "
                           f"mapping of its content, not a {type(given).__name__}")


@contextmanager
def named(model: ModelInput, cluster: ClusterInput = None) -> Iterator[tuple[str, str | None]]:
    """(model, cluster) as the names the pipeline resolves, inside the call's scratch
    directory (removed when the block ends)."""
    with owned_scratch() as scratch:
        (scratch / "model").mkdir()
        (scratch / "cluster").mkdir()
        model_name = _name(scratch, "model", model)
        if model_name is None:
            raise ArchipelagoError("model=None: give a model's name, path or content")
        yield model_name, _name(scratch, "cluster", cluster)
