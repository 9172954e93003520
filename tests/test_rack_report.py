"""A rack (`2x2xu280 --split tp=2,pp=2`) reports as a ring does, plus its split and a row per
stage: the same `--json` keys, table rows and report page, figures that add up over the
stages, and a page whose cluster chart joins the stages by their hops."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago.api import plan_and_estimate
from archipelago.cli import app
from archipelago.estimate.summary import head_rows
from archipelago.strategies.tensor_parallel.report import summarize

RACK = ("gpt2-345m", "2x2xu280", "dfx")
WORK = {"tokens": "16:16", "split": "tp=2,pp=2"}
# What a rack adds to a ring's keys: its split, the transfers between stages, a row each.
RACK_ONLY = {"parameters", "split", "transfer_s", "stages"}


def archi(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_rack_has_every_key_a_ring_has_and_its_stages() -> None:
    rack = summarize(*plan_and_estimate(*RACK, WORK)).as_json()
    ring = summarize(*plan_and_estimate("gpt2-345m", "2xu280", "dfx",
                                        {"tokens": "16:16"})).as_json()
    assert set(rack) - set(ring) == RACK_ONLY and set(ring) <= set(rack)
    assert [d["rank"] for d in rack["devices"]] == [0, 1, 2, 3]
    assert rack["tokens_per_s_per_device"] == pytest.approx(rack["tokens_per_s"] / 4)
    assert rack["time_to_first_token_s"] == rack["prefill_s"]
    # the stages' busy time and the hops are the whole run
    busy = sum(s["busy_s"] for s in rack["stages"])
    assert busy + rack["transfer_s"] == pytest.approx(rack["latency_s"], rel=1e-12)
    # each device holds what its stage's row says the fullest of them holds
    for stage in rack["stages"]:
        held = [d["hbm_bytes"] for d in rack["devices"][2 * stage["stage"]:][:2]]
        assert max(held) == stage["hbm_bytes"]


def test_a_rack_s_rows_read_its_json_figures() -> None:
    """The split, the transfers and each stage's row show the figures `--json` gives:
    gpt2-345m's 24 layers split 13 + 11 over two rings of two boards."""
    summary = summarize(*plan_and_estimate(*RACK, WORK))
    data = summary.as_json()
    rows = {cells[0]: cells[1:] for cells in head_rows(summary.figures)}
    assert rows["split (given)"] == ("tp=2 x pp=2 (4 of 4 devices)",)
    assert rows["inter-stage transfers (whole run)"] == (f"{data['transfer_s'] * 1e3:,.3f} ms",)
    assert "tokens/s per device" not in rows  # batch 1: the same as tokens/s over 4
    stages = next(s for s in summary.sections if s.title.startswith("per stage"))
    assert [r[:3] for r in stages.rows] == [("0", "0-12", "0-1"), ("1", "13-23", "2-3")]
    for cells, stage in zip(stages.rows, data["stages"], strict=True):
        assert cells[3:] == (f"{stage['prefill_s'] * 1e3:,.1f}",
                             f"{stage['decode_s_per_token'] * 1e3:,.3f}",
                             f"{stage['hbm_bytes'] / 1e9:,.2f}", f"{stage['ddr_bytes'] / 1e9:,.2f}")


def test_a_batch_shows_tokens_per_device_and_why_it_runs_in_turn() -> None:
    summary = summarize(*plan_and_estimate("gpt2-345m", "2xu280", "dfx",
                                           {"tokens": "16:16", "batch": "4"}))
    data = summary.as_json()
    rows = {cells[0]: cells[1:] for cells in head_rows(summary.figures)}
    assert rows["tokens/s per device"] == (f"{data['tokens_per_s'] / 2:,.2f}",)
    assert "split (auto)" not in rows and "stages" not in data  # a ring shows no split
    assert summary.notes == [f"note: {data['batch_note']}"] and data["batch_note"]


def test_a_rack_plan_prints_the_ring_table_and_its_stages() -> None:
    out = archi("plan", *RACK[:1], "--cluster", RACK[1], "--strategy", RACK[2],
                "--tokens", "16:16", "--split", "tp=2,pp=2")
    assert out.exit_code == 0, out.output
    for row in ("decode first → last token", "split (given)", "per stage", "per device",
                "inter-stage transfers"):
        assert row in out.output


def test_archi_report_of_a_rack_writes_its_page(tmp_path: Path) -> None:
    page = tmp_path / "rack.html"
    out = archi("report", RACK[0], "--cluster", RACK[1], "--strategy", RACK[2],
                "--tokens", "16:16", "--split", "tp=2,pp=2", "--out", str(page))
    assert out.exit_code == 0, out.output
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count('class="plot"') == 11  # + stages
    data = json.loads(archi("plan", RACK[0], "--cluster", RACK[1], "--strategy", RACK[2],
                            "--tokens", "16:16", "--split", "tp=2,pp=2", "--json").output)
    assert data["split"]["pp"] == 2 and len(data["stages"]) == 2
