"""The names a Python caller picks from, as string enums made from the registries the CLI
reads (`Strategy.DFX`, `Device.U280`, `NumberFormat.W4A16`), and the typed keyword
arguments of the library turned into the words the CLI's parsers read, so that both go
through one validation (a number, a list, a duration or an enum becomes the text a user
would have typed; the kind's parser then accepts or refuses it in the CLI's one line).

The enums are built on first use, not at `import archipelago`: the strategy registry and
the device catalog are read then. A member's name is its value upper-cased with `-` and
`.` as `_` (`lora-q` is `Strategy.LORA_Q`); any `str` is accepted where an enum is."""

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError

# The options whose text is a duration (durations.py): a number given for one is seconds.
DURATIONS = ("latency_target", "ttft", "tpot")


def _enum(name: str, values: Iterable[str]) -> type[StrEnum]:
    members = {value.upper().replace("-", "_").replace(".", "_"): value for value in values}
    return StrEnum(name, members)  # type: ignore[return-value]


@cache
def strategy_enum() -> type[StrEnum]:
    from archipelago.strategies.registry import strategies

    return _enum("Strategy", strategies())


@cache
def device_enum() -> type[StrEnum]:
    from archipelago.hardware.catalog import catalog

    return _enum("Device", catalog())


@cache
def format_enum() -> type[StrEnum]:
    from archipelago.number_formats import PRECISIONS

    return _enum("NumberFormat", PRECISIONS)


ENUMS: dict[str, Callable[[], type[StrEnum]]] = {
    "Strategy": strategy_enum, "Device": device_enum, "NumberFormat": format_enum}


def seconds_text(value: float | timedelta) -> str:
    """A duration in seconds as the text durations.parse_seconds reads ("0.05s")."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def word(name: str, value: Any) -> str:
    """`value` as the text of option `name` on the command line: True/False as
    true/false, a list or tuple comma-separated (a pair for `tokens`: IN:OUT), a number
    in Python's spelling, a duration (a number of seconds or a timedelta) with its unit,
    an enum by its value, a path as a path."""
    if isinstance(value, StrEnum | Path):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if name in DURATIONS and isinstance(value, int | float | timedelta):
        return seconds_text(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        joint = ":" if name == "tokens" else ","
        return joint.join(word(name, item) for item in value)
    raise ArchipelagoError(f"{name}={value!r}: give a number, text, a list or a path "
                           f"(a {type(value).__name__} has no command-line spelling)")


def words(options: Mapping[str, Any]) -> dict[str, str]:
    """`options` left out where None, the rest as their command-line text."""
    return {name: word(name, value) for name, value in options.items() if value is not None}
