"""The packaged hardware catalog: devices, the links between them (NVLink, PCIe, Aurora) and
the Ethernet switches boards hang off. Numbers are written as {value, source} so every
figure keeps its citation; loading strips the sources, and `raw_catalog()`, `raw_links()`,
`raw_switches()` keep them inspectable (`unsourced_numbers` finds any figure written without
one). `get_device`, `get_link` (a link or a switch's hop, by name) and `get_switch` are the
lookups; docs/hardware.md lists the entries and their datasheets."""

from functools import cache
from importlib import resources
from typing import Any, TypeVar

from pydantic import ValidationError

from archipelago.errors import ConfigError, UnknownNameError, elide
from archipelago.hardware.device import Device, Host, Switch
from archipelago.hardware.link import CatalogLink, Link
from archipelago.yaml_loader import load_packaged

_Entry = TypeVar("_Entry", Device, Host, Switch, CatalogLink)


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


def raw_hosts() -> dict[str, Any]:
    """The host servers as written, sources kept."""
    return _raw()["hosts"]


def raw_links() -> dict[str, Any]:
    """The named links as written, sources kept."""
    return _raw()["links"]


def _validated(model: type[_Entry], key: str, entry: dict[str, Any], source: str) -> _Entry:
    try:
        # strict: a user's `custom_devices` entry writing `true` or "16" for a number is
        # refused, naming the field (the catalog's own entries are numbers throughout)
        return model.model_validate({**unwrap_sourced(entry), "key": key}, strict=True)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err, prefix=key) from None


def device_from_dict(key: str, entry: dict[str, Any], source: str) -> Device:
    """A device entry; the links it names (`network.link`, `host_link`) must be catalog
    links and its `host` a catalog host server, checked here so a typo is refused where it
    is written."""
    device = _validated(Device, key, entry, source)
    named = {"network.link": device.network.link if device.network else None,
             "host_link": device.host_link}
    for field, name in named.items():
        if name is not None and name.lower() not in catalog_links():
            raise ConfigError(source, f"{key}.{field}", f"unknown link '{elide(name, 60)}'; valid: "
                              f"{', '.join(catalog_links())}")
    if device.host is not None and device.host.lower() not in hosts():
        raise ConfigError(source, f"{key}.host", f"unknown host '{elide(device.host, 60)}'; "
                          f"valid: {', '.join(hosts())}")
    return device


@cache
def catalog() -> dict[str, Device]:
    return {k: _device(k) for k in raw_catalog()}


@cache
def _device(key: str) -> Device:
    """One catalog device, validated the first time it is asked for: a plan on U280s
    builds the U280 only, not the two dozen others (every `archi plan` pays it)."""
    return device_from_dict(key, raw_catalog()[key], "catalog.yaml")


def get_device(key: str) -> Device:
    if key.lower() not in raw_catalog():
        raise UnknownNameError("device", key, raw_catalog(), "archi catalog")
    return _device(key.lower())


@cache
def switches() -> dict[str, Switch]:
    return {k: _validated(Switch, k, v, "catalog.yaml") for k, v in raw_switches().items()}


@cache
def catalog_links() -> dict[str, CatalogLink]:
    return {k: _validated(CatalogLink, k, v, "catalog.yaml") for k, v in raw_links().items()}


def get_link(key: str) -> Link:
    """A named hop: a catalog link (`nvlink4`, `pcie3-x16`, `aurora-qsfp28`) or one hop
    through a switch at its line rate (`eth-100g`)."""
    if key.lower() in catalog_links():
        return catalog_links()[key.lower()].link()
    if key.lower() in switches():
        return switches()[key.lower()].link()
    raise UnknownNameError("link", key, [*catalog_links(), *switches()])


def compare_defaults() -> list[str]:
    """The devices `archi compare` runs without --devices: those tagged `compare_default`."""
    return [k for k, d in catalog().items() if d.compare_default]


@cache
def hosts() -> dict[str, Host]:
    return {k: _validated(Host, k, v, "catalog.yaml") for k, v in raw_hosts().items()}


def get_host(key: str) -> Host:
    """A host server by name (`pcie-4u-8`, `dgx-h100`)."""
    if key.lower() not in hosts():
        raise UnknownNameError("host", key, hosts())
    return hosts()[key.lower()]


def get_switch(key: str) -> Switch:
    """A switch kind by name (`eth-100g`, `eth-200g`, `eth-400g`)."""
    table = switches()
    if key.lower() not in table:
        raise UnknownNameError("switch", key, table)
    return table[key.lower()]
