"""Every model_type in the installed transformers' causal-LM mapping, its default config
written to a config.json and read through the public path (`spec_from_config_file`):
planned with a parameter count equal to transformers' own, or refused with a one-line
reason (issue 32 point 1). Prints the Markdown table of docs/models.md ("Every causal LM
transformers ships") and its totals; reads with an empty cache of its own.

    python -m benchmarks.model_sweep            # the table, then the totals
"""

import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from archipelago.cache_dir import DIR_ENV
from archipelago.errors import ArchipelagoError
from archipelago.models.hf_config import spec_from_config_file
from archipelago.models.weights import parameter_count

PREFIX = "field 'model_type': "  # every refusal of a type says it of this field


@dataclass(frozen=True)
class Row:
    model_type: str
    parameters: int | None  # planned with this many parameters
    reason: str | None  # refused: the one line, without the file's name


def causal_lm_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def default_config(model_type: str) -> dict:
    """transformers' default config of the type (just the type, where transformers cannot
    make even that: the read then says why)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return transformers.AutoConfig.for_model(model_type).to_dict()
    except Exception:  # transformers' own validation of its own defaults
        return {"model_type": model_type}
    finally:
        transformers.logging.set_verbosity(verbosity)


def read_default(model_type: str, folder: Path) -> Row:
    """The type's default config as a user's checkpoint directory, read as the CLI reads
    it; anything but a spec or the project's one-line error propagates (a defect)."""
    directory = folder / model_type
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(default_config(model_type)))
    try:
        spec = spec_from_config_file(directory)
    except ArchipelagoError as err:
        text = str(err)
        text = text[text.find(PREFIX) + len(PREFIX):] if PREFIX in text \
            else text.split(": ", 1)[-1]
        return Row(model_type, None, text.removeprefix(f"'{model_type}' is refused: "))
    return Row(model_type, parameter_count(spec), None)


def table(rows: list[Row]) -> str:
    lines = ["| model_type | read |", "|---|---|"]
    for row in rows:
        said = (f"planned, {row.parameters:,} parameters (= transformers')"
                if row.reason is None else f"refused: {row.reason}")
        lines.append(f"| `{row.model_type}` | {said.replace('|', '/')} |")
    return "\n".join(lines)


def main() -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        os.environ[DIR_ENV] = str(Path(folder) / "cache")  # every type read afresh
        rows = [read_default(t, Path(folder)) for t in causal_lm_types()]
    planned = sum(row.reason is None for row in rows)
    print(table(rows))
    print(f"\n{len(rows)} model types: {planned} planned with transformers' exact parameter "
          f"count, {len(rows) - planned} refused ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
