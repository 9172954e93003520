"""`archi compare --precision A,B`: the number format as one more combination dimension. Each
row equals `archi plan --precision X` of the same combination on the engine it names; a
format a strategy cannot run is refused for that combination alone, with its reason; one
store holds every format, so a rerun with another format estimates only its rows; and the
list is checked at the edge like the other lists."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archipelago import api
from archipelago.compare.request import parse_precisions
from archipelago.compare.rows import group_reasons
from archipelago.errors import ArchipelagoError
from archipelago.explore.best import best_engine
from archipelago.number_formats import FORMATS, PRECISIONS, SYNONYMS
from archipelago.strategies.registry import get_strategy
from tests.cli_here import archi_here

# In this process (compare's default; both runners give one comparison:
# test_compare_inproc.py): no Dask cluster's start-up in each of these runs.
SMALL = ("compare", "gpt2-345m", "--tokens", "16:8", "--counts", "1", "--devices",
         "u280,v100", "--strategies", "dfx,lora-q,gpu-graph")




def _compare(store: Path, *args: str) -> dict:
    out = archi_here(*SMALL, "--store", str(store), "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_each_row_is_the_plan_of_its_format_and_a_format_not_run_is_refused(
        tmp_path: Path) -> None:
    data = _compare(tmp_path / "s.jsonl", "--precision", "fp16,w8a8")
    assert data["precision"] == ["fp16", "w8a8"]
    rows = {(r["strategy"], r["device"], r["precision"]): r for r in data["rows"]}
    # DFX computes in FP16 (seeds/001 §V-C): its w8a8 row alone is refused, with the reason
    assert ("dfx", "u280", "fp16") in rows and ("dfx", "u280", "w8a8") not in rows
    dfx = [r for r in data["refused"] if r["strategy"] == "dfx" and "w8a8" in r["line"]]
    assert len(dfx) == 1 and dfx[0]["line"].startswith("dfx on u280, v100 x1 in w8a8: ")
    assert dfx[0]["reason"].startswith("--precision w8a8: DFX computes in FP16")
    assert dfx[0]["combinations"] == [{"device": d, "count": 1, "batch": 1,
                                       "precision": "w8a8"} for d in ("u280", "v100")]
    assert {("lora-q", "u280", "fp16"), ("lora-q", "u280", "w8a8")} <= set(rows)
    for (strategy, device, fmt), row in rows.items():
        assert row["label"].endswith(f" {fmt}")
        work = {"tokens": "16:8", "precision": fmt}
        engine, label = None, "published"
        if get_strategy(strategy).design_space is not None:  # searched by compare, read back
            found = best_engine("gpt2-345m", f"1x{device}", strategy,
                                api.parse_workload(strategy, work))
            assert found.cached
            published = get_strategy(strategy).config({}).model_dump()
            engine, label = found.engine, found.label(published)
        assert row["engine"] == label
        est = api.plan_and_estimate("gpt2-345m", f"1x{device}", strategy, work,
                                    engine).estimate
        assert (row["latency_s"], row["tokens_per_s"]) == (est.latency_s, est.tokens_per_s)
    # the page's table: a precision column, each row's format in it, in rank order
    from archipelago.compare.page import comparison_page

    (table,) = comparison_page(data).tables
    at = table.columns.index("precision")
    assert [r[at] for r in table.rows] == [r["precision"] for r in data["rows"]]
    # and as the command says it: `archi plan --precision w8a8 --engine best`
    plan = json.loads(archi_here("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy",
                            "lora-q", "--tokens", "16:8", "--precision", "w8a8", "--engine",
                            "best", "--json").stdout)
    lora = rows[("lora-q", "u280", "w8a8")]
    assert plan["engine"]["engine"] == lora["engine"]
    assert plan["latency_s"] == lora["latency_s"]


def test_a_rerun_with_another_format_estimates_only_its_rows(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    args = ("--engine", "published")
    first = _compare(store, "--precision", "w4a16", *args)
    assert (first["evaluated"], first["reused"]) == (6, 0)  # 3 strategies x 2 devices
    both = _compare(store, "--precision", "w4a16,fp16", *args)
    assert (both["evaluated"], both["reused"]) == (6, 6)
    assert all(" fp16 " in key for key in both["evaluated_keys"])
    old = {r["label"]: r["latency_s"] for r in first["rows"]}
    assert {r["label"]: r["latency_s"] for r in both["rows"] if r["label"] in old} == old
    own = _compare(store, *args)  # each strategy's own format: rows of their own
    assert (own["evaluated"], own["reused"]) == (6, 0) and own["precision"] is None
    assert all("precision" not in r and not r["label"].endswith("fp16") for r in own["rows"])
    table = archi_here(*SMALL, "--store", str(store), "--precision", "fp16,w4a16", *args).stdout
    assert "precision" in table and "0 combinations estimated now, 12 read back" in table
    assert "precision" not in archi_here(*SMALL, "--store", str(store), *args).stdout


def test_no_row_that_can_run_is_a_failed_comparison(tmp_path: Path) -> None:
    out = archi_here(*SMALL[:7], "u280", "--strategies", "dfx", "--precision", "w8a8,fp8",
                "--engine", "published", "--store", str(tmp_path / "s.jsonl"))
    assert out.returncode == 1, out.stderr
    assert "refused: dfx on u280 x1 in w8a8: --precision w8a8: DFX" in out.stdout
    assert "refused: dfx on u280 x1 in fp8: --precision fp8: DFX" in out.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("fp16,w5a16", "--precision 'w5a16': valid choices are fp16, fp16-kv8, bf16"),
    ("fp16,,w4a16", "--precision 'fp16,,w4a16': give a comma-separated list with no empty"),
    ("", "--precision '': give a comma-separated list with no empty entries"),
    (",".join(["fp16"] * 65), "--precision: 65 entries; at most 64"),
])
def test_a_bad_format_list_is_one_line_before_any_work(text: str, message: str,
                                                       tmp_path: Path) -> None:
    out = archi_here(*SMALL, "--precision", text, "--store", str(tmp_path / "s.jsonl"))
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_a_format_named_twice_or_by_its_synonym_counts_once() -> None:
    assert parse_precisions("w4a16, int4,W4A16,fp16") == ("w4a16", "fp16")
    assert parse_precisions("int8") == ("w8a8",)
    with pytest.raises(ArchipelagoError, match="'fp32'"):
        parse_precisions("fp16,fp32")


_ITEM = st.one_of(st.sampled_from([*PRECISIONS, "W4A16", " w8a8 ", "fp32", "int2", "", " "]),
                  st.text(max_size=12))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=70))
def test_any_format_list_is_the_formats_it_names_or_one_line(items: list[str]) -> None:
    """Hostile lists: the formats named, in order and once each, or one line naming the
    option, and never anything but the formats of number_formats.py."""
    text = ",".join(items)
    names = [SYNONYMS.get(t.strip().lower(), t.strip().lower()) for t in text.split(",")]
    try:
        got = parse_precisions(text)
    except ArchipelagoError as err:
        assert str(err).startswith("--precision") and "\n" not in str(err)
        assert (len(names) > 64 or any(n not in FORMATS for n in names)), text
        return
    assert got == tuple(dict.fromkeys(names)) and len(names) <= 64


def test_refusals_in_several_formats_share_a_line() -> None:
    def refused(device: str, count: int, fmt: str) -> tuple[dict, str]:
        return ({"strategy": "dfx", "device": device, "count": count, "batch": 1,
                 "precision": fmt}, f"'{device}' is a gpu without HBM")

    lines = [g.line() for g in group_reasons(
        [refused(d, n, f) for f in ("fp16", "w4a16") for d in ("h100", "a100")
         for n in (1, 2)] + [refused("l4", 8, "fp16")])]
    assert lines == ["dfx on h100, a100 x1,2 in fp16,w4a16; l4 x8 in fp16: '<device>' is a "
                     "gpu without HBM"]
