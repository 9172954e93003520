"""Time to refuse huge hostile user files just under safe_read's 16 MiB cap (issue #25
point 6: "a file under the size cap is parsed once and refused within a few seconds").
Each file is generated here (15 MiB) and handed to the loader a command would use:
cluster YAML, DAG YAML/JSON and engine configs.

    python -m benchmarks.bench_hostile_files
"""

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from archipelago.cli import load_engine_config
from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster_file import load_cluster_file
from archipelago.models.dag import load_dag

SIZE = 15 * 2**20
CLUSTER_HEAD = ("name: big\ntopology: switch\nlink: {latency_ns: 0, bandwidth_gbytes_s: 3}\n"
                "nodes:\n")
LAYER = {"name": "c{}", "type": "conv", "deps": ["c0"], "in_channels": 8, "out_channels": 8,
         "kernel": 3, "height": 32, "width": 32}


def _lines(head: str, line: Callable[[int], str]) -> str:
    """`head`, then line(0), line(1), ... up to SIZE characters."""
    parts, size, i = [head], len(head), 0
    while size < SIZE - 200:
        parts.append(line(i))
        size += len(parts[-1])
        i += 1
    return "".join(parts)


def _layers_json() -> str:
    count = SIZE // (len(json.dumps(LAYER)) + 8)
    layers = [{**LAYER, "name": f"c{i}", "deps": [f"c{i - 1}"] if i else []}
              for i in range(count)]
    return json.dumps({"name": "big", "layers": layers})


def _alias_bomb() -> str:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(rows) + "\n" + "#" * (SIZE - 1000) + "\n"


def cases() -> Iterator[tuple[str, str, str]]:
    """(name, file suffix, loader kind, text) of each hostile file."""
    yield ("cluster: 300k nodes", ".yaml", "cluster", _lines(
        CLUSTER_HEAD, lambda i: f"  - {{name: n{i}, device: u280, clock_mhz: 200}}\n"))
    yield ("cluster: 1.4M flat keys", ".yaml", "cluster",
           _lines("name: big\n", lambda i: f"k{i}: {i}\n"))
    yield ("cluster: flow list of 7M ints", ".yaml", "cluster",
           "name: big\nnodes: [" + ",".join(["1"] * (SIZE // 2 - 20)) + "]\n")
    yield ("cluster: block nesting 5,000 deep", ".yaml", "cluster",
           "".join(" " * i + "- \n" for i in range(5000)))
    yield ("cluster: one 15 MiB string", ".yaml", "cluster",
           'name: "' + "a" * (SIZE - 20) + '"\n')
    yield ("cluster: alias bomb + 15 MiB comment", ".yaml", "cluster", _alias_bomb())
    yield ("dag: 60k layers (YAML)", ".yaml", "dag", _lines("name: big\nlayers:\n", lambda i: (
        f"  - {{name: c{i}, type: conv, deps: [c{max(i - 1, 0)}], in_channels: 8, "
        f"out_channels: 8, kernel: 3, height: 32, width: 32}}\n")))
    yield ("dag: 70k layers (JSON)", ".json", "dag", _layers_json())
    yield ("engine: 1.4M keys (YAML)", ".yaml", "engine",
           _lines("", lambda i: f"k{i}: {i}\n"))
    yield ("engine: 1.4M keys (JSON)", ".json", "engine", json.dumps(
        {f"k{i}": i for i in range(SIZE // 20)}))


LOADERS: dict[str, Callable[[Path], object]] = {
    "cluster": load_cluster_file, "dag": load_dag,
    "engine": lambda path: load_engine_config(path, "chef")}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, suffix, kind, text in cases():
            path = Path(folder) / f"hostile{suffix}"
            path.write_text(text)
            start = time.perf_counter()
            try:
                LOADERS[kind](path)
                outcome = "ACCEPTED"
            except ArchipelagoError as err:
                outcome = str(err).split(": ", 1)[-1][:70]
            took = time.perf_counter() - start
            print(f"{name:38s} {path.stat().st_size / 2**20:5.1f} MiB {took:6.2f} s  {outcome}")


if __name__ == "__main__":
    main()
