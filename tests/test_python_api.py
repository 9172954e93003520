"""The Python API (issue 38 point 1): the calls answer what the commands answer (their
`--json` is the independent reference here), with typed arguments, one name per figure
across kinds, the CLI's one-line errors as one exception family, and a light import; the
examples of docs/python.md run as written."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import archipelago as ap
from tests.cli_here import archi_here

DOCS = Path(__file__).parent.parent / "docs" / "python.md"
HEAVY = ("torch", "optuna", "plotly", "dask", "pandas", "transformers")


def _cli_json(*args: str) -> dict:
    out = archi_here(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_import_and_first_lookup_stay_free_of_heavy_libraries() -> None:
    code = ("import sys, archipelago as ap; ap.plan; ap.compare; ap.Strategy; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_an_fpga_and_a_gpu_estimate_share_names_and_equal_the_commands_figures() -> None:
    for cluster, strategy in (("4xu280", "dfx"), ("2xa100", "gpu-eager")):
        est = ap.estimate("gpt2-1.5b", cluster, strategy, tokens=(64, 32), batch=8)
        cli = _cli_json("plan", "gpt2-1.5b", "--cluster", cluster, "--strategy", strategy,
                        "--tokens", "64:32", "--batch", "8")
        assert (est.latency_s, est.ttft_s, est.tpot_s, est.tokens_per_s) == (
            cli["latency_s"], cli["prefill_s"], cli["decode_s_per_token"], cli["tokens_per_s"])
        assert est.batch == cli["batch"] == 8 and est.feasible
        assert est.details == cli
    assert ap.estimate("gpt2-1.5b", "4xu280", "dfx", batch=8) == \
        ap.estimate("gpt2-1.5b", "4xu280", "dfx", batch="8")  # numbers as numbers


def test_boards_and_price_come_from_the_catalog() -> None:
    est = ap.estimate("gpt2-1.5b", "4xu280", ap.Strategy.DFX)
    row = next(r for r in _cli_json("compare", "gpt2-1.5b", "--tokens", "64:64", "--devices",
                                    "u280", "--counts", "4", "--strategies", "dfx",
                                    "--engine", "published")["rows"])
    assert (est.boards, est.devices, est.upfront_usd) == (4, ["u280"] * 4, row["upfront_usd"])


def test_a_kind_without_tokens_leaves_token_figures_none() -> None:
    est = ap.estimate("ibert-base", "72xsidewinder", "galapagos", seq_len=64)
    cli = _cli_json("plan", "ibert-base", "--cluster", "72xsidewinder", "--strategy",
                    "galapagos", "--seq-len", "64")
    assert est.latency_s == cli["latency_s"] and est.ttft_s is None and est.tpot_s is None
    assert est.boards == 72


def test_a_config_mapping_plans_as_its_config_file(tmp_path: Path, tiny_gpt2_config) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(tiny_gpt2_config))
    from_file = ap.estimate(folder / "config.json", "2xu280", "dfx", tokens=(8, 8))
    from_mapping = ap.estimate({**tiny_gpt2_config, "_name_or_path": "org/tiny"}, "2xu280",
                               "dfx", tokens=(8, 8))
    assert from_mapping.latency_s == from_file.latency_s and from_mapping.model == "tiny"


def test_compare_rows_are_the_commands_rows(tmp_path: Path) -> None:
    args = {"devices": ["u280", ap.Device.V100], "counts": [1, 2], "batch": [1, 4],
            "strategies": ["dfx", "gpu-graph"], "latency_target": 0.05, "engine": "published"}
    got = ap.compare("gpt2-345m", (16, 8), store=tmp_path / "s.jsonl", **args)
    cli = _cli_json("compare", "gpt2-345m", "--tokens", "16:8", "--devices", "u280,v100",
                    "--counts", "1,2", "--batch", "1,4", "--strategies", "dfx,gpu-graph",
                    "--latency-target", "50ms", "--engine", "published", "--store",
                    str(tmp_path / "t.jsonl"))
    assert [(r.rank, r.cluster, r.batch, r.latency_s, r.ttft_s, r.meets_target, r.front)
            for r in got.rows] == [
        (r["rank"], f"{r['count']}x{r['device']}", r["batch"], r["latency_s"], r["prefill_s"],
         r["meets_target"], r["front"]) for r in cli["rows"]]
    assert got.refused == [r["line"] for r in cli["refused"]] and len(got.refused) == 2
    frame = got.to_pandas()
    assert list(frame["rank"]) == list(range(1, len(got.rows) + 1))
    assert got.store == tmp_path / "s.jsonl"


def test_errors_are_the_commands_lines_in_one_family() -> None:
    cases = [
        (lambda: ap.estimate("gpt2-1.5b", "4xu280", "dfx", batch=0),
         ["plan", "gpt2-1.5b", "--cluster", "4xu280", "--strategy", "dfx", "--batch", "0"]),
        (lambda: ap.estimate("gpt2-1.5b", "4xu280", "dfxx"),
         ["plan", "gpt2-1.5b", "--cluster", "4xu280", "--strategy", "dfxx"]),
        (lambda: ap.compare("gpt2-1.5b", (64, 64), devices=["u281"]),
         ["compare", "gpt2-1.5b", "--tokens", "64:64", "--devices", "u281"]),
    ]
    for call, args in cases:
        with pytest.raises(ap.ArchipelagoError) as err:
            call()
        cli = archi_here(*args)
        assert cli.returncode == 2 and cli.stderr.strip() == f"error: {err.value}"
    with pytest.raises(ap.UnknownNameError) as unknown:
        ap.estimate("gpt2-1.5b", "4xu280", "dfxx")
    assert "lora-q" in unknown.value.choices
    with pytest.raises(ap.InvalidArgument, match=r"^replicas=5000: 5000 is outside 1\.\.1024$"):
        ap.serve("gpt2-345m", "4xu280", "dfx", rate=2, replicas=5000)
    with pytest.raises(ap.ArchipelagoError, match="no command-line spelling"):
        ap.estimate("gpt2-1.5b", "4xu280", "dfx", batch={"b": 1})


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch) -> None:
    est = ap.estimate("gpt2-1.5b", "4xu280", "dfx")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ap.ArchipelagoError, match=r"archipelago\[tables\]"):
        est.to_pandas()


def test_enums_are_the_registries_names() -> None:
    assert ap.Strategy.LORA_Q == "lora-q" and ap.Device.U280 == "u280"
    assert ap.NumberFormat.W4A16 == "w4a16"
    from archipelago.strategies.registry import strategies

    assert sorted(ap.Strategy) == sorted(strategies())


def test_a_call_named_like_its_subpackage_stays_a_call() -> None:
    import archipelago.compare.run as run  # the subpackage, by its dotted path

    assert callable(run.compare) and ap.compare.__name__ == "compare"
    assert "tokens" in str(__import__("inspect").signature(ap.compare))


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_docs_examples_run_and_write_nothing_where_they_run(tmp_path: Path,
                                                                monkeypatch) -> None:
    blocks = _python_blocks(DOCS.read_text())
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), scope)  # the docs' own code
    assert os.listdir(tmp_path) == []


def test_the_pipelines_text_options_refuse_a_number_in_one_line() -> None:
    from archipelago.api import plan_and_estimate

    with pytest.raises(ap.ArchipelagoError, match=r"^option 'batch' = 8: give its "
                       r"command-line text \('8'\), or use the typed calls"):
        plan_and_estimate("gpt2-1.5b", "4xu280", "dfx", {"batch": 8})


def test_serve_is_the_commands_simulation() -> None:
    got = ap.serve("gpt2-345m", "4xu280", "dfx", rate=3, prompt=64, output="uniform:8,24",
                   requests=120, ttft=0.5, tpot="40ms", seed=7)
    cli = _cli_json("serve", "gpt2-345m", "--cluster", "4xu280", "--strategy", "dfx",
                    "--rate", "3", "--prompt", "64", "--output", "uniform:8,24", "--requests",
                    "120", "--ttft", "500ms", "--tpot", "40ms", "--seed", "7")
    assert got.details == cli
    assert (got.ttft_s, got.tokens_per_s, got.capacity_rate, got.boards) == (
        cli["ttft_s"], cli["throughput_tokens_per_s"], cli["capacity"]["rate"], 4)
    assert got.usd_per_million_tokens == cli["cost"]["usd_per_million_output_tokens"]
    searched = ap.serve("gpt2-345m", "4xu280", "dfx", rate=3, prompt=64, output=16,
                        requests=60, engine="best")
    cli = _cli_json("serve", "gpt2-345m", "--cluster", "4xu280", "--strategy", "dfx",
                    "--rate", "3", "--prompt", "64", "--output", "16", "--requests", "60",
                    "--engine", "best")
    mine, theirs = searched.details.pop("engine"), cli.pop("engine")  # search_s, from_store
    assert searched.details == cli and mine["parameters"] == theirs["parameters"]
    assert theirs["engine"].startswith("searched") and theirs["from_store"]
