"""Read a written build back into a graph, parsing the XML the way the Galapagos
middleware does (xmltodict; `cluster.kernel` and `cluster.node`, a single child being a
dict rather than a list), so a build can be checked against the plan it came from."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archipelago.errors import ConfigError


@dataclass
class BuildGraph:
    """kernel name -> (cluster, kernel ID); kernel name -> IP of its node; the streams as
    (src, dst, bytes per row); each kernel's parsed logical-file entry."""

    ids: dict[str, tuple[int, int]]
    placement: dict[str, str]
    streams: set[tuple[str, str, int]]
    logical: dict[str, dict[str, Any]]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(str(path), "file", f"unreadable build file: {err}") from None


def read_build(root: Path | str) -> BuildGraph:
    import xmltodict

    root = Path(root)
    clusters = _load_json(root / "cluster_description.json")["clusters"]
    layers = _load_json(root / "layer_description.json")
    by_ip = {(k["cluster"], k["ip"]): k["name"] for k in layers["kernels"]}
    ids: dict[str, tuple[int, int]] = {}
    placement: dict[str, str] = {}
    logical: dict[str, dict[str, Any]] = {}
    for c in clusters:
        kernels = xmltodict.parse((root / c["logical_file"]).read_text())["cluster"]["kernel"]
        by_id = {}
        for entry in _as_list(kernels):
            name = by_ip[(c["id"], entry["#text"].strip())]
            ids[name] = (c["id"], int(entry["num"]))
            by_id[int(entry["num"])] = name
            logical[name] = entry
        nodes = xmltodict.parse((root / c["map_file"]).read_text())["cluster"]["node"]
        for node in _as_list(nodes):
            for kernel in _as_list(node["kernel"]):
                placement[by_id[int(kernel)]] = node["ip"].strip()
    streams = {tuple(row[:3]) for row in layers["streams"]}
    return BuildGraph(ids, placement, streams, logical)
