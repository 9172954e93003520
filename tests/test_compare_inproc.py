"""`archi compare` in this process (its default, or `--workers 0`) and on Dask (`--workers N`)
are one comparison: the same request gives the same JSON, volatile fields aside, and a store
written by either is resumed by the other. A signal stops the in-process loop between two
results, keeping what finished, as it stops the Dask stream."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archipelago.batch.runner import in_process, run_here
from archipelago.compare import run as compare_run
from archipelago.compare.request import parse_request
from archipelago.compare.run import compare
from archipelago.compare.summary import comparison_dict
from archipelago.errors import Interrupted
from archipelago.models.zoo import resolve_model

NAMES = ["lora-q", "dfx", "gpu-graph"]
VOLATILE = ("store", "evaluated_keys")  # the store's path; the order results came back in


def _request(devices: str) -> Any:
    return parse_request("gpt2-345m", "16:8", devices, "1,2", ",".join(NAMES), "1,4", None,
                         "latency", NAMES, NAMES, engine="published")


def _stable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


def test_the_edge_decides_where_tasks_run() -> None:
    assert in_process(None, None) and in_process(0, None)
    assert not in_process(1, None) and not in_process(None, "tcp://10.0.0.5:8786")


def test_a_signal_stops_the_loop_between_results_keeping_the_finished() -> None:
    handed: list[str] = []

    def done(key: str, result: int) -> None:
        handed.append(key)
        if len(handed) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # heard, and acted on once this returns

    with pytest.raises(Interrupted, match="interrupted by SIGINT with 1 of 3 tasks") as caught:
        run_here(lambda n: n * n, {"a": 1, "b": 2, "c": 3}, done)
    assert handed == ["a"] and caught.value.exit_code == 130


def test_both_paths_give_the_same_comparison(tmp_path: Path) -> None:
    spec = resolve_model("gpt2-345m")
    request = _request("u280,v100")
    here = compare(request, spec, tmp_path / "here.jsonl")
    dask = compare(request, spec, tmp_path / "dask.jsonl", workers=1)
    assert len(here.evaluated) == 2 * 2 * 2 * 3 and here.rows and here.refused
    assert sorted(here.evaluated) == sorted(dask.evaluated)
    assert _stable(comparison_dict(here)) == _stable(comparison_dict(dask))
    lines = [sorted((tmp_path / f"{name}.jsonl").read_text().splitlines()[1:])
             for name in ("here", "dask")]
    assert lines[0] == lines[1]  # the same records, byte for byte, in arrival order aside


def test_each_path_resumes_the_others_store(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model("gpt2-345m")
    request = _request("u280,v100")
    every = 2 * 2 * 2 * 3
    real = compare_run.evaluate

    def stopping(task: Any) -> Any:  # the first task's records, then a Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)
        return real(task)

    store = tmp_path / "a.jsonl"
    monkeypatch.setattr(compare_run, "evaluate", stopping)
    with pytest.raises(Interrupted):
        compare(request, spec, store)
    monkeypatch.setattr(compare_run, "evaluate", real)
    kept = store.read_text().count("\n") - 1  # the header aside
    assert 0 < kept < every
    on_dask = compare(request, spec, store, workers=1)  # Dask resumes the in-process store
    assert (on_dask.reused, len(on_dask.evaluated)) == (kept, every - kept)
    fresh = compare(request, spec, tmp_path / "fresh.jsonl")
    assert _stable(comparison_dict(on_dask))["rows"] == _stable(comparison_dict(fresh))["rows"]

    other = tmp_path / "b.jsonl"  # and back: Dask writes part, this process the rest
    compare(_request("u280"), spec, other, workers=1)
    here = compare(request, spec, other)
    assert (here.reused, len(here.evaluated)) == (every // 2, every // 2)
    assert comparison_dict(here)["rows"] == comparison_dict(fresh)["rows"]


NO_DASK = """import runpy, sys
sys.argv = ["archi", *sys.argv[1:]]
try:
    runpy.run_module("archipelago", run_name="__main__")
except SystemExit as end:
    print("exit", end.code, "dask", "distributed" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize("workers", [(), ("--workers", "0")])
def test_the_command_runs_without_dask_by_default_or_with_workers_0(
        workers: tuple[str, ...], tmp_path: Path) -> None:
    args = ["compare", "gpt2-345m", "--tokens", "16:8", "--counts", "1", "--strategies",
            "dfx,gpu-graph", "--devices", "u280,v100", "--engine", "published", "--store",
            str(tmp_path / "s.jsonl"), "--json", *workers]
    out = subprocess.run([sys.executable, "-c", NO_DASK, *args], capture_output=True,
                         text=True, timeout=300)
    assert out.stderr.strip().endswith("exit 0 dask False"), out.stderr
    assert json.loads(out.stdout)["evaluated"] == 2 * 2
