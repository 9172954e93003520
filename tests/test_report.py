"""`archi report` and `plan --report`: what the charts hold, checked against the plan and
against independent paths (the API on another cluster, sums by hand); refusals; and the
core staying free of plotly. The real-browser check is tests/test_report_browser.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archipelago.api import plan_and_estimate
from archipelago.cli import app
from archipelago.strategies.galapagos.estimate import kernel_outputs
from archipelago.strategies.registry import kinds


def archi(*args: str):
    return CliRunner().invoke(app, list(args))


def test_core_commands_never_import_plotly() -> None:
    """The registry, the pipeline and both kinds' table reports load without plotly."""
    code = ("import sys, archipelago, archipelago.cli, archipelago.api\n"
            "from archipelago.strategies.registry import kinds\n"
            "for kind in kinds().values(): kind.hook('report'); kind.hook('estimator')\n"
            "assert 'plotly' not in sys.modules, 'plotly imported'")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_built_in_kind_has_a_page() -> None:
    assert all(kind.page for kind in kinds().values())


def test_plan_report_writes_the_page_beside_the_table(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    out = archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "dfx",
                "--tokens", "8:8", "--report", str(page))
    assert out.exit_code == 0, out.output
    assert "end-to-end latency" in out.output
    assert f"written to {page}" in out.output.replace("\n", "")
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<script src=" not in text  # inlined
    assert page.stat().st_size < 5e6
    # 8 charts (the last DFX's simulated layer), and the batch sweep's 2
    assert text.count('class="plot"') == 10


@pytest.mark.parametrize(("name", "extra", "message"), [
    ("exists.html", (), "exists; pass --force to replace it"),
    ("page.txt", (), "must end in .html"),
    ("missing/page.html", (), "does not exist"),
])
def test_report_refuses_bad_targets_before_planning(tmp_path: Path, name: str, extra: tuple,
                                                    message: str) -> None:
    (tmp_path / "exists.html").write_text("mine")
    out = archi("report", "gpt2-345m", "--cluster", "1xu280", "--out", str(tmp_path / name),
                *extra)
    assert out.exit_code == 2 and message in out.output
    assert (tmp_path / "exists.html").read_text() == "mine"  # the user's file is kept


def test_force_replaces_an_existing_page(tmp_path: Path) -> None:
    target = tmp_path / "exists.html"
    target.write_text("mine")
    out = archi("report", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                "--tokens", "8:8", "--out", str(target), "--force")
    assert out.exit_code == 0, out.output
    assert "<!DOCTYPE html>" in target.read_text()


def test_link_bytes_per_token_by_hand() -> None:
    """DFX on a ring of 4: per block, all-gathers of hidden, hidden, FFN and hidden FP16
    values, each link carrying 3/4 of each; nothing for the LM head, whole on every core."""
    from archipelago.strategies.tensor_parallel.page import _link_bytes_per_token

    plan = plan_and_estimate("gpt2-1.5b", "4xu280", "dfx").plan
    h, f, layers = plan.spec.hidden, plan.spec.ffn, plan.spec.layers
    by_hand = layers * (3 * h + f) * 2 * 3 / 4
    assert _link_bytes_per_token(plan.stages[0]) == pytest.approx(by_hand)


def test_device_count_sweep_equals_planning_each_cluster() -> None:
    """The scaling chart's points are what `plan` says for 1, 2, 4 (and 8) U280s."""
    from archipelago.report.sweep import device_count_sweep

    plan, work, _ = plan_and_estimate("gpt2-345m", "1xu280", "lora-q", {"tokens": "16:16"})
    counts, rates, refused = device_count_sweep(plan, work, lambda e: e.tokens_per_s)
    assert counts == [1, 2, 4, 8] and not refused
    direct = [plan_and_estimate("gpt2-345m", f"{n}xu280", "lora-q",
                                {"tokens": "16:16"}).estimate.tokens_per_s for n in counts]
    assert rates == pytest.approx(direct)


def test_device_count_sweep_notes_counts_the_strategy_refuses() -> None:
    """A device count above the heads is refused and named, not drawn."""
    from archipelago.report.sweep import device_count_sweep

    plan, work, _ = plan_and_estimate("gpt2-345m", "1xu280", "dfx", {"tokens": "8:8"})
    counts, _, refused = device_count_sweep(plan, work, lambda e: e.tokens_per_s, (1, 17))
    assert counts == [1] and len(refused) == 1 and "exceed its 16 attention heads" in refused[0]


def test_resource_bars_are_the_estimates_shares() -> None:
    from archipelago.strategies.tensor_parallel.page import _fractions

    plan, _, est = plan_and_estimate("gpt2-1.5b", "4xu280", "dfx")
    fractions, _ = _fractions(est)
    u280 = plan.program.devices[0].device
    assert fractions["DSP"][0] == est.devices[0].total.dsp / u280.resources.dsp
    assert fractions["HBM"][3] == pytest.approx(
        est.devices[3].hbm_bytes / u280.memory("hbm").capacity_bytes)


def test_galapagos_kernel_schedule_ends_within_the_encoder() -> None:
    """Every kernel sends its first row before its last, and no kernel's last row leaves
    after the encoder's last output T (which adds the hop to the next encoder)."""
    plan, _, est = plan_and_estimate("ibert-base", "72xsidewinder", "galapagos")
    spans = kernel_outputs(plan, est.seq_len)
    assert all(0 < first <= last for first, last in spans.values())
    assert max(last for _, last in spans.values()) < est.timing.last_output
    assert set(plan.compute) & set(spans) == {n for n, k in plan.compute.items() if k.layer == 0}


def test_page_headline_comes_from_the_json_summary(tmp_path: Path) -> None:
    """The numbers in the page's headline are --json's, digit for digit."""
    page = tmp_path / "g.html"
    assert archi("report", "ibert-base", "--cluster", "72xsidewinder", "--strategy",
                 "galapagos", "--out", str(page)).exit_code == 0
    data = json.loads(archi("plan", "ibert-base", "--cluster", "72xsidewinder", "--strategy",
                            "galapagos", "--json").output)
    text = page.read_text()
    for key in ("latency_s", "throughput_per_s", "fpgas_needed"):
        assert f'data-key="{key}" data-value="{json.dumps(data[key])}"' in text
    assert np.isfinite(data["latency_s"])


def test_host_call_timeline_replays_the_estimate() -> None:
    """Every call of the program appears once; each ends before the next position starts
    (calls of one position run together), and the last ends by the estimated latency."""
    from collections import Counter

    from archipelago.strategies.host_offload.estimate import call_timeline

    plan, _, est = plan_and_estimate("nmt-luong", "2xs10-2800", "persistent",
                                     {"steps": "3", "hidden": "64", "vocab": "64"})
    calls = call_timeline(plan, len(plan.program.calls))
    assert Counter(c for c, _, _ in calls) == Counter(plan.program.calls)
    starts = sorted({start for _, start, _ in calls})
    next_start = dict(zip(starts, [*starts[1:], est.latency_s], strict=True))
    assert all(start + seconds <= next_start[start] * (1 + 1e-9) + 1e-15
               for _, start, seconds in calls)
    assert len(starts) > 1 and starts[-1] < est.latency_s


def test_chef_link_bytes_from_the_mapping() -> None:
    """The CHEF cluster chart's bytes: every layer input (4-byte elements of its producer's
    output) whose producer the JSON mapping puts on another FPGA."""
    from archipelago.strategies.chef.page import _link_bytes

    plan, _, est = plan_and_estimate("vfs", "hacc", "chef")
    fpga = {m["layer"]: m["fpga"] for m in est["mapping"]}
    by_hand = sum(plan.dag.by_name[d].out_elements * 4 for layer in plan.dag.layers
                  for d in layer.deps if layer.name in fpga and fpga[d] != fpga[layer.name])
    assert by_hand > 0
    assert sum(_link_bytes(plan).values()) == by_hand
