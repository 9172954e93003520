"""Typed access to a Hugging Face config dictionary that names the file and field on every
failure: what every family reader (hf_config.py, hf_families/) reads its fields through."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from archipelago.errors import ConfigError


class Fields:
    """Typed access to a config dictionary that names the source on every failure."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self.config, self.source = config, source

    def int(self, key: str, default: int | None = None, at_most: int | None = None) -> int:
        """A positive integer; `at_most` bounds one a reader loops over (the layer count)
        before ModelSpec would refuse it."""
        value = self.config.get(key, default)
        if value is None:
            raise ConfigError(self.source, key, "missing (an integer is required)")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(self.source, key, f"must be a positive integer, got {value!r}")
        if at_most is not None and value > at_most:
            raise ConfigError(self.source, key, f"must be at most {at_most}, got {value}")
        return value

    def optional_int(self, key: str) -> int | None:
        """A positive integer, or None where the field is absent or null."""
        return None if self.config.get(key) is None else self.int(key)

    def count(self, key: str, default: int = 0) -> int:
        """A non-negative integer (absent or null: `default`)."""
        value = self.config.get(key)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(self.source, key, f"must be an integer >= 0, got {value!r}")
        return value

    def indices(self, key: str) -> tuple[int, ...]:
        """A list of layer indices (absent or null: none)."""
        value = self.config.get(key) or []
        if not isinstance(value, list) or any(
                isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in value):
            raise ConfigError(self.source, key, f"must be a list of layer indices, got {value!r}")
        return tuple(value)

    def str(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key, default)
        if not isinstance(value, str):
            raise ConfigError(self.source, key, f"must be a string, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(self.source, key, f"must be true or false, got {value!r}")
        return value

    def number(self, key: str, kind: str, within: str = "") -> float:
        """A float field of kind "positive", "std" or "probability" (see _CHECKED), at the
        top level or inside the object `within`."""
        value = (self.config[within] if within else self.config)[key]
        key = f"{within}.{key}" if within else key
        low, high, zero_ok, need = _NUMBER_KINDS[kind]
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not low <= value <= high
                or (value == 0 and not zero_ok)):
            raise ConfigError(self.source, key, f"must be {need}, got {value!r}")
        return float(value)



_NUMBER_KINDS = {  # kind: (low, high, zero allowed, what the message asks for)
    "positive": (0.0, math.inf, False, "a finite number > 0"),
    # weights drawn wider than 1 overflow fp16 activations (real configs use about 0.02)
    "std": (0.0, 1.0, True, "a standard deviation in [0, 1]"),
    "probability": (0.0, 1.0, True, "a probability in [0, 1]"),
}
