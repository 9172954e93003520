"""Numbers in a user's file are numbers: YAML `true` or `"16"` where a model wants an int or
a float is an error naming the field, where pydantic's lax mode would read 1 and 16. For
models that stay lax because the same values also arrive as text from the command line
(`--bandwidth 3` joins the engine parameters) or as tuples built in Python (a DAG's layers):
the file's values are checked here, at the edge, against the model's field types."""

from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel

from archipelago.errors import ConfigError, elide


def _numeric(annotation: Any) -> bool:
    """Whether a field only takes numbers (int or float, maybe None), not text or flags."""
    types = set(get_args(annotation)) or {annotation}
    return bool(types & {int, float}) and not types & {bool, str, Path}


def check_numbers(data: dict[Any, Any], model: type[BaseModel], source: str,
                  prefix: str = "") -> None:
    """A ConfigError for the first of `data`'s values that is a boolean or text where
    `model`'s field of that name takes a number (`prefix.` before the field's name)."""
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None or not isinstance(value, bool | str) or not _numeric(field.annotation):
            continue
        written = (f"the boolean {str(value).lower()}" if isinstance(value, bool)
                   else f"the text {elide(repr(value), 60)} (write numbers unquoted)")
        raise ConfigError(source, f"{prefix}.{key}" if prefix else key,
                          f"must be a number, got {written}")
