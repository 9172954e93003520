"""The shared summary renderer (estimate/summary.py): a hand-written summary renders to the
exact JSON object and tables written out here by hand, and each converted kind's `--json`,
table and page headline come from its one summary."""

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.estimate.summary import (
    MS,
    Column,
    Figure,
    Section,
    Summary,
    Unit,
    row,
    verdict,
)
from archipelago.strategies.registry import kinds


def _small() -> Summary:
    return Summary(
        [Figure("model", "toy"),
         Figure("latency_s", 0.0125, "latency", unit=MS, headline="latency"),
         Figure("tokens", {"input": 8, "output": 4}),
         row("tokens in / out", "8 / 4"),
         Figure("devices", [{"index": 0, "dsp": 12}]),
         Figure("kernels", 1234, "kernels", headline="kernels"),
         *verdict(False, ["device 0: DSP needs 12 of 10 (20% over)"])],
        title="toy on 1xbox", columns=(Column("metric", right=False), Column("value")),
        sections=[Section("per device", (Column("device"), Column("DSP")), [("0", "12")])],
        notes=["a note"], dim=True)


def _text(summary: Summary) -> str:
    console = Console(record=True, width=60, color_system=None)
    summary.print(console)
    return console.export_text()


def test_json_is_the_keyed_figures_in_order() -> None:
    out = _small().as_json()
    assert out == {"model": "toy", "latency_s": 0.0125, "tokens": {"input": 8, "output": 4},
                   "devices": [{"index": 0, "dsp": 12}], "kernels": 1234, "feasible": False,
                   "reasons": ["device 0: DSP needs 12 of 10 (20% over)"]}
    assert list(out) == ["model", "latency_s", "tokens", "devices", "kernels", "feasible",
                         "reasons"]
    assert json.dumps(out) == json.dumps(out, sort_keys=False)  # plain JSON values


def test_tables_hold_the_labelled_rows_and_the_sections() -> None:
    head, section = _small().tables()
    assert head.title == "toy on 1xbox" and head.style == "dim"
    assert [c.header for c in head.columns] == ["metric", "value"]
    assert [c.justify for c in head.columns] == ["left", "right"]
    assert [list(c._cells) for c in head.columns] == [
        ["latency", "tokens in / out", "kernels", "feasible"],
        ["12.500 ms", "8 / 4", "1,234", "[red]no[/red]"]]
    assert section.title == "per device"
    assert [list(c._cells) for c in section.columns] == [["0"], ["12"]]


def test_printed_reasons_first_then_tables_then_notes() -> None:
    text = _text(_small())
    lines = text.splitlines()
    assert lines[0] == "does not fit: device 0: DSP needs 12 of 10 (20% over)"
    assert lines[1].strip() == "toy on 1xbox"
    assert "│ latency         │ 12.500 ms │" in text
    assert "│ kernels         │     1,234 │" in text
    assert text.index("per device") > text.index("feasible")
    assert lines[-1] == "a note"


def test_headline_and_units() -> None:
    assert [f.key for f in _small().headline()] == ["latency_s", "kernels"]
    assert Unit("%", 100, 1).show(0.4567) == "45.7 %"
    assert Unit(digits=2).show(1234.5) == "1,234.50"
    assert MS.show(0.0015) == "1.500 ms"


def test_short_rows_are_padded_and_long_rows_refused() -> None:
    three = (Column("metric", right=False), Column("a"), Column("b"))
    head, = Summary([row("only a", "1")], "t", three).tables()
    assert [list(c._cells) for c in head.columns] == [["only a"], ["1"], [""]]
    with pytest.raises(ValueError, match="3 cells for 2 columns"):
        Summary([row("x", "1", "2")], "t", three[:2]).tables()


def test_a_key_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'a' given twice"):
        Summary([Figure("a", 1), Figure("a", 2)]).as_json()


def test_no_columns_prints_no_head_table() -> None:
    summary = Summary([Figure("x", 1, "x")], sections=[Section("s", (Column("c"),), [("1",)])])
    assert [t.title for t in summary.tables()] == ["s"]


CASES = [  # one plan per converted kind, with the headline keys its page shows
    (("ibert-base", "--cluster", "72xsidewinder", "--strategy", "galapagos"),
     ["latency_s", "encoder_latency_s", "first_output_s", "throughput_per_s", "kernels",
      "fpgas_needed"]),
    (("llama2-7b", "--cluster", "2xh100", "--strategy", "gpu-graph", "--tokens", "16:16"),
     ["latency_s", "tokens_per_s", "prefill_s", "decode_s_per_token",
      "bandwidth_efficiency"]),
    (("cnn-lstm", "--cluster", "hacc", "--strategy", "h2h"),
     ["latency_s", "comm_ratio", "layers"]),
    (("nmt-luong", "--cluster", "2xs10-2800", "--strategy", "persistent", "--steps", "3",
      "--hidden", "64", "--vocab", "64"), ["cards", "steps", "latency_s", "setup_s"]),
    (("gpt2-345m", "--cluster", "2xu280", "--strategy", "lora-f", "--tokens", "16:16"),
     ["latency_s", "tokens_per_s", "prefill_s", "decode_s_per_token"]),
    (("gpt2-345m", "--cluster", "2x2xu280", "--strategy", "dfx", "--tokens", "16:16",
      "--split", "tp=2,pp=2"), ["latency_s", "tokens_per_s", "prefill_s",
                                "decode_s_per_token"]),
]


@pytest.mark.parametrize(("args", "headline"), CASES, ids=[a[4] for a, _ in CASES])
def test_each_kind_s_json_and_page_headline_come_from_its_summary(
        tmp_path: Path, args: tuple[str, ...], headline: list[str]) -> None:
    """The page's headline figures are --json's keys and values, in the summary's order."""
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["plan", *args, "--json"]).output)
    page = tmp_path / "p.html"
    out = runner.invoke(app, ["report", *args, "--out", str(page)])
    assert out.exit_code == 0, out.output
    text = page.read_text()
    keys = [part.split('"')[0] for part in text.split('class="figure" data-key="')[1:]]
    assert keys == headline
    for key in headline:
        assert f'data-key="{key}" data-value="{json.dumps(data[key])}"' in text


def test_every_kind_s_report_gives_one_summary() -> None:
    """`archi plan` and `archi report` call `summarize` on whatever kind they plan."""
    for kind in kinds().values():
        assert callable(getattr(kind.hook("report"), "summarize", None)), kind.name
