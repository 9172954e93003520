"""The packaged hardware catalog: devices and the Ethernet switches boards hang off. Numbers
are written as {value, source} so every figure keeps its citation; loading strips the
sources, and `raw_catalog()` / `raw_switches()` keep them inspectable (`unsourced_numbers`
finds any figure written without one). `get_device(key)` and `get_switch(key)` are the
lookups; docs/hardware.md lists the entries and their datasheets."""

from functools import cache
from importlib import resources
from typing import Any, TypeVar

from pydantic import ValidationError

from archipelago.errors import ConfigError, UnknownNameError
from archipelago.hardware.device import Device, Switch
from archipelago.yaml_loader import load_packaged

_Entry = TypeVar("_Entry", Device, Switch)


def unwrap_sourced(node: Any) -> Any:
    """Replace every {value, source} leaf with its value."""
    if isinstance(node, dict):
        if set(node) == {"value", "source"}:
            return node["value"]
        return {k: unwrap_sourced(v) for k, v in node.items()}
    if isinstance(node, list):
        return [unwrap_sourced(v) for v in node]
    return node


def unsourced_numbers(node: Any, path: str = "") -> list[str]:
    """Paths of numbers written without a source (the catalog must have none)."""
    if isinstance(node, dict):
        if set(node) == {"value", "source"}:
            return [] if str(node["source"]).strip() else [path]
        return [p for k, v in node.items() for p in unsourced_numbers(v, f"{path}.{k}")]
    if isinstance(node, bool):
        return []
    return [path] if isinstance(node, int | float) else []


@cache
def _raw() -> dict[str, Any]:
    text = resources.files("archipelago.hardware").joinpath("catalog.yaml").read_text()
    return load_packaged(text)


def raw_catalog() -> dict[str, Any]:
    """The devices as written, sources kept."""
    return _raw()["devices"]


def raw_switches() -> dict[str, Any]:
    """The switches as written, sources kept."""
    return _raw()["switches"]


def _validated(model: type[_Entry], key: str, entry: dict[str, Any], source: str) -> _Entry:
    try:
        # strict: a user's `custom_devices` entry writing `true` or "16" for a number is
        # refused, naming the field (the catalog's own entries are numbers throughout)
        return model.model_validate({**unwrap_sourced(entry), "key": key}, strict=True)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err, prefix=key) from None


def device_from_dict(key: str, entry: dict[str, Any], source: str) -> Device:
    return _validated(Device, key, entry, source)


@cache
def catalog() -> dict[str, Device]:
    return {k: device_from_dict(k, v, "catalog.yaml") for k, v in raw_catalog().items()}


def get_device(key: str) -> Device:
    devices = catalog()
    if key.lower() not in devices:
        raise UnknownNameError("device", key, devices, "archi catalog")
    return devices[key.lower()]


@cache
def switches() -> dict[str, Switch]:
    return {k: _validated(Switch, k, v, "catalog.yaml") for k, v in raw_switches().items()}


def get_switch(key: str) -> Switch:
    """A switch kind by name (`eth-100g`, `eth-200g`, `eth-400g`)."""
    table = switches()
    if key.lower() not in table:
        raise UnknownNameError("switch", key, table)
    return table[key.lower()]
