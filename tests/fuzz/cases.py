"""Each input kind driven through the real loaders and the `plan` path, in-process. A case
returns the plan's figures (the dict `--json` prints) for the harness to check."""

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from archipelago.api import plan_and_estimate
from archipelago.cli import app, load_engine_config
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.torchrun import torchrun_place
from archipelago.errors import ArchipelagoError
from archipelago.strategies.host_offload.proxies import load_profile
from archipelago.strategies.registry import get_strategy
from tests.fuzz import inputs, store_inputs
from tests.fuzz.pt2_inputs import MARKER

# The model each strategy plans in the engine-config and cluster cases.
PLANNED = {"dfx": ("gpt2-345m", "4xu280"), "lora-f": ("gpt2-345m", "4xu280"),
           "lora-q": ("gpt2-345m", "4xu280"), "galapagos": ("bert-base", "72xsidewinder"),
           "persistent": ("lstm", "1xs10-2800")}
# The strategy that plans each model family.
FAMILY_STRATEGY = {"gpt2": "dfx", "opt": "lora-f", "llama": "lora-q", "bert": "galapagos",
                   "ibert": "galapagos", "roberta": "galapagos"}


def figures(model: str, cluster: str, strategy: str, engine: dict[str, Any] | None = None,
            workload: dict[str, str] | None = None) -> dict[str, Any]:
    result = plan_and_estimate(model, cluster, strategy, workload, engine)
    return get_strategy(strategy).plan_kind.hook("report").summarize(*result).as_json()


def engine_case(strategy: str, config: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The config as a user's YAML file, read by the CLI's loader, then planned."""
    path = tmp / "engine.yaml"
    path.write_text(yaml.safe_dump(config))
    model, cluster = PLANNED[strategy]
    return figures(model, cluster, strategy, load_engine_config(path, strategy))


def cluster_case(data: bytes, strategy: str, tmp: Path) -> dict[str, Any]:
    path = tmp / "cluster.yaml"
    path.write_bytes(data)
    model, _ = PLANNED[strategy]
    return figures(model, str(path), strategy)


def model_case(config: Any, family: str, tmp: Path) -> dict[str, Any]:
    path = tmp / "config.json"
    path.write_text(json.dumps(config))
    strategy = FAMILY_STRATEGY[family]
    return figures(str(path), PLANNED[strategy][1], strategy)


def file_case(data: bytes, loader: str, tmp: Path) -> Any:
    """Raw bytes handed to each file loader in turn (cluster, engine, model, CPU profile)."""
    path = tmp / f"input.{'json' if loader in ('model', 'profile') else 'yaml'}"
    path.write_bytes(data)
    if loader == "cluster":
        return figures("gpt2-345m", str(path), "dfx")
    if loader == "engine":
        return figures("gpt2-345m", "4xu280", "dfx", load_engine_config(path, "dfx"))
    if loader == "model":
        return figures(str(path), "4xu280", "dfx")
    load_profile(path)
    return None


_RUNNER = CliRunner()


def cli_case(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """`archi` itself: exit 0 with JSON figures (1: of a plan that does not fit, saying
    so), or exit 2 with one `error:` line."""
    result = _RUNNER.invoke(app, args, env=env)
    if result.exit_code == 0:
        return json.loads(result.stdout)
    if result.exit_code == 1 and "--json" in args and result.stdout.startswith("{"):
        figures = json.loads(result.stdout)
        if figures.get("feasible") is False:
            return figures
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    lines = result.stderr.strip().splitlines()
    if result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        raise ArchipelagoError(lines[0].removeprefix("error: "))
    if result.exit_code == 2 and "Usage:" in result.stderr:  # typer's own usage error
        raise ArchipelagoError(lines[-1])
    raise RuntimeError(f"exit {result.exit_code}: {result.stderr[-300:]!r}")


def emulate_edge_case(seed: int, timeout: float, env: dict[str, str], precision: str
                      ) -> None:
    """What `archi emulate` checks before it starts a process: the job (its seed, timeout
    and precision) and the torchrun environment (the emulation itself is the fault tests'
    subject)."""
    EmulationJob(get_strategy("dfx").workload({}, "emulate"), seed, precision, None, timeout)
    torchrun_place(env)


def dag_case(doc: Any, tmp: Path) -> dict[str, Any]:
    path = tmp / "dag.yaml"
    path.write_text(yaml.safe_dump(doc))
    return figures(str(path), "hacc", "h2h")


def dag_emulate_case(doc: Any, tmp: Path) -> dict[str, Any]:
    """A hostile layer-DAG YAML through `archi emulate --strategy chef`: one process per FPGA
    of hacc running its layers in torch, then the unsplit DAG. A run whose outputs differ
    from the unsplit DAG's is a wrong result: a negative figure, which the harness counts
    as insane."""
    path = tmp / "dag.yaml"
    path.write_text(yaml.safe_dump(doc))
    report = cli_case(["emulate", str(path), "--strategy", "chef", "--cluster", "hacc",
                       "--timeout", "10", "--json"])
    return report if report.get("outputs_equal") else {"outputs_equal": -1}


def ip_case(doc: Any, tmp: Path) -> dict[str, Any]:
    """A user's IP template file, through `--engine-config ip_file:`, planned by CHEF."""
    (tmp / "ips.yaml").write_text(yaml.safe_dump(doc))
    (tmp / "dag.yaml").write_text(yaml.safe_dump(inputs.tiny_dag()))
    return figures(str(tmp / "dag.yaml"), "hacc", "chef", {"ip_file": str(tmp / "ips.yaml")})


def chef_cluster_case(doc: Any, tmp: Path) -> dict[str, Any]:
    path = tmp / "chef.yaml"
    path.write_text(yaml.safe_dump(doc))
    return figures("vfs", str(path), "h2h")


def onnx_case(file: tuple[bytes, bytes | None], tmp: Path) -> dict[str, Any]:
    """A (mutated) ONNX model and its external-data file, planned as `archi plan x.onnx`."""
    data, external = file
    (tmp / "model.onnx").write_bytes(data)
    if external is not None:
        (tmp / "w.bin").write_bytes(external)
    else:
        (tmp / "w.bin").unlink(missing_ok=True)
    return figures(str(tmp / "model.onnx"), "hacc", "h2h")


def pt2_case(data: bytes, tmp: Path) -> dict[str, Any]:
    """A (hostile) torch.export archive planned as `archi plan model.pt2`. A payload that
    ran (its marker file appeared) is a wrong result whatever the plan said: a negative
    figure, which the harness counts as insane."""
    path = tmp / "model.pt2"
    path.write_bytes(data)
    MARKER.unlink(missing_ok=True)
    try:
        result = figures(str(path), "hacc", "h2h")
    except ArchipelagoError:
        if MARKER.exists():
            return {"payload_ran": -1}
        raise
    return {"payload_ran": -1} if MARKER.exists() else result


def _labelled(records: Any) -> dict[str, Any]:
    """{label: (figures)} of a comparison's rows, from `--json` rows or store records."""
    return {f"{r['strategy']} {r['count']}x{r['device']}": tuple(r[f] for f in
                                                              store_inputs.FIGURES)
            for r in records}


def _as_fresh(rows: list[dict[str, Any]]) -> bool:
    """Whether `rows` are the fresh estimate's combinations with its figures (to a
    millionth: bytes inserted deep in a number's digits change it by less, and no reader
    of the table would call that figure a lie)."""
    _, base = store_inputs.base_lines()
    fresh, shown = _labelled(v for _, v in base if v["status"] == "ok"), _labelled(rows)
    return shown.keys() == fresh.keys() and all(
        math.isclose(a, b, rel_tol=1e-6) for k in fresh for a, b in zip(shown[k], fresh[k],
                                                                         strict=True))


@contextmanager
def config_libraries() -> Iterator[None]:
    """torch and transformers imported before the model-config cases: a config's first read
    imports both (models/hf_meta.py), seconds on a loaded machine, which the first case's
    time limit would count as a hang and its alarm cut mid-import, leaving a half-imported
    module to fail a later kind."""
    import torch  # noqa: F401
    import transformers  # noqa: F401

    yield


@contextmanager
def compare_store_base() -> Iterator[None]:
    """The base store's fresh estimates, made before the first compare-store case (outside
    its time limit). The cases re-estimate in this process, compare's default: where the
    tasks run is test_compare_inproc.py's, and a Dask client per case cost twice the CPU."""
    store_inputs.base_lines()
    yield


def compare_store_case(data: bytes, tmp: Path) -> dict[str, Any]:
    """A (hostile) store handed to `archi compare --store` of the combinations it was
    written for. Rows other than a fresh estimate's (a figure read back as edited, a
    combination lost or gained) are a wrong result: a negative figure, which the harness
    counts as insane."""
    path = tmp / "store.jsonl"
    path.write_bytes(data)
    result = cli_case([*store_inputs.ARGS, "--store", str(path)])
    return result if _as_fresh(result["rows"]) else {"rows_differ": -1}
