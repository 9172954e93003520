"""What transformers itself makes of a config: the model built on the meta device (shapes,
no memory), its parameter count and, for a causal LM, its structure in ModelSpec's fields
(hf_introspect.py) or the one-line reason it does not map. Cached by the config's content,
transformers' version and this mapping code's, one small JSON file per config under the
cache directory (`<ARCHIPELAGO_CACHE_DIR>/config-reads/`), so a second read imports neither
torch nor transformers. Absent transformers (the `emulate` extra), `transformers_read`
answers None."""

import hashlib
import json
import os
import re
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from archipelago.cache_dir import cache_root
from archipelago.models.limits import MAX_EXPERTS, MAX_HEADS, MAX_LAYERS

FOLDER = "config-reads"
INSTALL = "pip install 'archipelago[emulate]'"  # pyproject.toml: torch and transformers
# Counts transformers builds one module per unit of: bounded before a hostile config makes
# it build a billion (ModelSpec's own limits, models/limits.py).
_BOUNDS = (("layers", MAX_LAYERS), ("experts", MAX_EXPERTS), ("heads", MAX_HEADS))


@dataclass(frozen=True)
class MetaRead:
    """`parameters`: sum(p.numel()) of the model transformers built (None: it could not
    build one, `refusal` says why); `values`: ModelSpec's fields read from its modules, or
    None with the `refusal` of what does not map."""

    parameters: int | None
    values: dict[str, Any] | None
    refusal: str | None


@cache
def transformers_version() -> str | None:
    """The installed transformers' version, without importing it (None: not installed):
    the `__version__` its package's __init__.py sets (a read of a few kilobytes; parsing
    the package metadata costs a cold process about 10 ms of the 50 a second read may
    take)."""
    found = find_spec("transformers") if find_spec("torch") is not None else None
    if found is None or found.origin is None:
        return None
    try:
        with open(found.origin, encoding="utf-8") as init:
            head = init.read(1 << 16)
    except OSError:
        head = ""
    version = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", head, re.MULTILINE)
    if version:
        return version.group(1)
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


@cache
def reader_digest() -> str:
    """The mapping code itself (this module and the two it maps with): an entry written by
    another version of them is never read."""
    here = Path(__file__).parent
    code = b"".join((here / name).read_bytes()
                    for name in ("hf_meta.py", "hf_introspect.py", "hf_modules.py"))
    return hashlib.sha256(code).hexdigest()[:16]


def transformers_read(config: Mapping[str, Any], decoder: bool) -> MetaRead | None:
    """The config as transformers builds it (as a causal LM, or an encoder's bare model),
    from the cache where read before; None without transformers."""
    version = transformers_version()
    if version is None:
        return None
    text = json.dumps([config, decoder, version, reader_digest()], sort_keys=True,
                      separators=(",", ":"), default=str)
    path = cache_root() / FOLDER / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"
    found = _load(path)
    if found is None:
        found = _build(config, decoder, version)
        _store(path, found)
    return found


def _load(path: Path) -> MetaRead | None:
    """An entry, or None where absent or not one this version wrote (rebuilt then)."""
    try:
        data = json.loads(path.read_text())
        read = MetaRead(**data)
    except (OSError, ValueError, TypeError):
        return None
    good = (read.parameters is None or type(read.parameters) is int) and (
        isinstance(read.values, dict) or isinstance(read.refusal, str))
    return read if good else None


def _store(path: Path, read: MetaRead) -> None:
    """Written aside and renamed: never seen half-written. A cache that cannot be written
    (read-only, full) costs the next read its build, nothing else."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
        with os.fdopen(handle, "w") as out:
            json.dump(asdict(read), out)
        os.replace(partial, path)
    except OSError:
        return


def _bounded(config: Mapping[str, Any]) -> str | None:
    for key, value in config.items():
        for word, bound in _BOUNDS:
            if word in key and type(value) is int and value > bound:
                return f"config {key}: must be at most {bound}, got {value} (models/limits.py)"
    return None


def _build(config: Mapping[str, Any], decoder: bool, version: str) -> MetaRead:
    """Build on the meta device, silencing transformers' own warnings (a default config
    warns of unused fields); any failure of transformers on the user's config is its
    one-line reason."""
    too_big = _bounded(config)
    if too_big:
        return MetaRead(None, None, too_big)
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        return MetaRead(None, None, f"model_type '{model_type}' is unknown to transformers "
                        f"{version}")
    if decoder and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        kind = ("an encoder-decoder model" if config.get("is_encoder_decoder") is True
                else "a model")
        return MetaRead(None, None, f"'{model_type}' is {kind} with no causal-LM class in "
                        f"transformers {version} (AutoModelForCausalLM); Archipelago plans "
                        "decoders and the BERT-shaped encoders")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            fields = {k: v for k, v in config.items() if k != "model_type"}
            built = transformers.AutoConfig.for_model(model_type, **fields)
            model = _model(transformers, built, decoder)
    except Exception as err:  # transformers' own checks of a user's file, any type
        first = (str(err).strip().splitlines() or [""])[0][:160]
        return MetaRead(None, None, f"transformers {version} cannot build it: "
                        f"{type(err).__name__}: {first}")
    finally:
        transformers.logging.set_verbosity(verbosity)
    return _mapped(model, built, decoder)


def _model(transformers: Any, built: Any, decoder: bool) -> Any:
    if decoder:
        return transformers.AutoModelForCausalLM.from_config(built)
    try:  # what the encoder families count: no pooler
        return transformers.AutoModel.from_config(built, add_pooling_layer=False)
    except TypeError:  # DistilBERT and DeBERTa have none to leave out
        return transformers.AutoModel.from_config(built)


def _mapped(model: Any, built: Any, decoder: bool) -> MetaRead:
    from archipelago.models.hf_introspect import read_model
    from archipelago.models.hf_modules import Unmapped

    count = sum(p.numel() for p in model.parameters())
    if not decoder:
        return MetaRead(count, None, "an encoder: counted, not read by its modules")
    try:
        return MetaRead(count, read_model(model, built), None)
    except Unmapped as err:
        return MetaRead(count, None, str(err))
