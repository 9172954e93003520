"""`archi simulate` and the report page's simulated timeline (issue #23 point 5).

The simulated and estimated figures come from separate models of the DFX machine (the timing
simulator schedules the compiled instructions; dfx.py adds closed forms per plan step), so
their agreement on a small model checks the command's mapping of one onto the other: a pass
counted twice, a group under the wrong class or a wrong clock would break it."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago.api import plan_and_estimate
from archipelago.cli import app
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.dfx_program.asm import format_instr
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from tests.browser import find_chromium
from tests.conftest import TINY_GPT2

RUNNER = CliRunner()
# 140 GB of FP16 weights: more than one ring of four U280s holds, so stages of rings
LLAMA_70B = str(Path(__file__).parent / "data" / "llama-2-70b" / "config.json")
# Groups both models cost the same way; norms, residual and embedding differ by the
# chaining the analytical engine leaves out (docs/strategies/dfx-simulator.md).
SHARED = ("qkv", "attention", "attn_out", "ffn", "lm_head")
TIMELINE = "one decoder layer, instruction by instruction (timing simulator)"


@pytest.fixture
def tiny(tmp_path: Path) -> str:
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY_GPT2))
    return str(path)


def run_json(*args: str) -> dict:
    out = RUNNER.invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_json_has_both_sides_and_they_agree_on_a_small_model(tiny: str) -> None:
    """One core, no ring sync; both sides carry the same two fitted figures."""
    summary = run_json("simulate", tiny, "--cluster", "1xu280", "--tokens", "8:8", "--json")
    sim, est = summary["simulated"], summary["estimated"]
    for side in (sim, est):
        assert {"latency_s", "prefill_s", "decode_s_per_token", "tokens_per_s",
                "cycles_per_class", "layer_s"} <= side.keys()
        assert len(side["layer_s"]) == TINY_GPT2["n_layer"]
        # every step and instruction counted once: the classes add up to the latency
        total = sum(side["cycles_per_class"].values()) / summary["clock_hz"]
        assert total == pytest.approx(side["latency_s"], rel=1e-6)
        assert side["tokens_per_s"] == pytest.approx(8 / side["latency_s"])
        assert side["prefill_s"] + 7 * side["decode_s_per_token"] == pytest.approx(
            side["latency_s"])
    assert sim["cycles_per_class"].keys() == est["cycles_per_class"].keys()
    assert sim["cycles_per_instruction"]["conv1d"] > 0
    assert sim["latency_s"] == pytest.approx(est["latency_s"], rel=0.05)
    for name in SHARED:
        assert sim["cycles_per_class"][name] == pytest.approx(est["cycles_per_class"][name],
                                                              rel=0.05), name
    for simulated, estimated in zip(sim["layer_s"], est["layer_s"], strict=True):
        assert simulated == pytest.approx(estimated, rel=0.05)
    # the estimate is `archi plan`'s, figure for figure
    plan = run_json("plan", tiny, "--cluster", "1xu280", "--tokens", "8:8", "--json")
    for key in ("latency_s", "prefill_s", "decode_s_per_token", "tokens_per_s"):
        assert est[key] == plan[key], key


@pytest.mark.parametrize(("cluster", "paper", "simulated"), [
    ("1xu280", 93.10, 93.48), ("4xu280", 207.56, 209.29)])
def test_the_calibration_points_as_the_note_gives_them(cluster: str, paper: float,
                                                       simulated: float) -> None:
    """gpt2-345m at 64:64 (the defaults): the estimate fitted to seeds/001's two points, the
    simulator (with the same two calibrated figures) as docs/strategies/dfx-simulator.md
    tabulates it, within 1% of both."""
    summary = run_json("simulate", "gpt2-345m", "--cluster", cluster, "--json")
    assert summary["estimated"]["tokens_per_s"] == pytest.approx(paper, abs=0.01)
    assert summary["simulated"]["tokens_per_s"] == pytest.approx(simulated, abs=0.01)


def test_the_table_shows_both_sides() -> None:
    out = RUNNER.invoke(app, ["simulate", "gpt2-345m", "--cluster", "1xu280", "--tokens",
                              "8:8"])
    assert out.exit_code == 0, out.output
    for text in ("1 core:", "simulated", "estimated", "sim / est", "end-to-end latency",
                 "cycles per class", "conv1d", "DFX_TILE_EFFICIENCY"):
        assert text in out.stdout


def test_a_plan_that_does_not_fit_is_printed_with_its_reasons_and_status_1(
        tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from archipelago.strategies.tensor_parallel import estimate

    monkeypatch.setattr(estimate, "stage_reasons", lambda *args: ["device 0 (u280): DSP needs 2"])
    out = RUNNER.invoke(app, ["simulate", tiny, "--cluster", "1xu280", "--tokens", "8:8"])
    assert out.exit_code == 1, out.output
    assert out.stdout.startswith("does not fit: device 0 (u280): DSP needs 2")
    out = RUNNER.invoke(app, ["simulate", tiny, "--cluster", "1xu280", "--tokens", "8:8",
                              "--json"])
    assert out.exit_code == 1 and json.loads(out.stdout)["reasons"] == [
        "device 0 (u280): DSP needs 2"]


@pytest.mark.parametrize(("args", "message"), [
    (["gpt2-345m", "--strategy", "lora-q"],
     "strategy 'lora-q' has no instruction set to simulate (its engine runs no program); "
     "strategies with one: dfx"),
    (["vfs", "--strategy", "chef"], "strategy 'chef' has no instruction set"),
    (["gpt2-345m", "--strategy", "nope"], "unknown strategy 'nope'"),
    (["no-such-model"], "unknown model 'no-such-model'"),
    (["gpt2-345m", "--cluster", "4xnope"], "unknown device 'nope'"),
    (["gpt2-345m", "--tokens", "64"], "--tokens '64' must look like IN:OUT"),
    (["gpt2-345m", "--tokens", "1000:100"], "exceed gpt2-345m's 1024 positions"),
    ([LLAMA_70B, "--cluster", "8x4xu280"], "a program simulation runs one ring"),
    (["opt-6.7b", "--cluster", "1xu280"], "core 0's HBM image is 13.38 GiB; the U280 has 8"),
    (["gpt2-345m", "--batch", "2"], "No such option: --batch"),
    (["llama2-7b", "--cluster", "4xu280", "--tokens", "4:4"],
     "llama2-7b cannot be compiled to DFX programs: it normalizes with rmsnorm, and DFX "
     "programs exist for LayerNorm with scale and bias only (seeds/001 §IV-C)"),
    (["opt-6.7b", "--cluster", "4xu280", "--tokens", "4:4"],
     "opt-6.7b cannot be compiled to DFX programs: it uses activation 'relu', and a DFX core "
     "computes gelu, gelu_new only"),
    (["gpt2-345m", "--cluster", "3xu280", "--tokens", "4:4"],
     "gpt2-345m on 3 cores: the timing simulator runs the same program on every core, so "
     "each must hold an equal share (heads 16, key/value heads 16, hidden 1024 and FFN 4096 "
     "each a multiple of the cores); counts that split it so: 1, 2, 4, 8, 16"),
])
def test_refusals_are_one_line_with_status_2(args: list[str], message: str) -> None:
    out = RUNNER.invoke(app, ["simulate", *args])
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2, out.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert out.stdout == ""


def test_only_strategies_with_an_instruction_set_are_named() -> None:
    """The registry answers from the engine config, without planning."""
    assert get_strategy("dfx").instruction_set == "seeds/001 §IV-C"
    assert get_strategy("lora-f").instruction_set is None
    assert get_strategy("chef").instruction_set is None


def _page(model: str, cluster: str, strategy: str = "dfx"):
    result = plan_and_estimate(model, cluster, strategy, {"tokens": "8:8"}, command="report")
    kind = get_strategy(strategy).plan_kind
    return result, kind.hook("page")(*result, kind.hook("report").summarize(*result).as_json())


def _timeline(model: str, cluster: str, strategy: str = "dfx"):
    result, page = _page(model, cluster, strategy)
    return result.plan, [c for c in page.charts if c.title == TIMELINE]


def test_the_page_draws_every_cores_layer_as_its_own_trace_set(tiny: str) -> None:
    plan, charts = _timeline(tiny, "4xu280")
    (chart,) = charts
    traces = chart.figure.data
    layers = [p.layer for p in compile_plan(plan.program, 8, 8)[0]]
    cores = {f"core {c}": layers[c] for c in range(4)}
    assert {t.meta for t in traces} == set(cores)
    names = {core: {t.name for t in traces if t.meta == core} for core in cores}
    assert all(n == names["core 0"] for n in names.values())  # SPMD: the same classes
    for core, layer in cores.items():
        mine = [t for t in traces if t.meta == core]
        rows = {row for t in mine for row in t.y}
        assert rows == {f"{core} · {fsm}" for fsm in ("compute", "dma", "router")}
        # every instruction of the layer once, its listing in the hover text
        texts = [text for t in mine for text in t.text]
        assert sorted(text.split(" · ")[0] for text in texts) == sorted(
            format_instr(i) for i in layer.instrs)
        assert all(x >= 0 for t in mine for x in t.x) and all(b >= 0 for t in mine
                                                               for b in t.base)
    # only the legend's first entry of a class is shown
    assert sum(t.showlegend for t in traces) == len(names["core 0"])


def test_a_strategy_without_an_instruction_set_has_no_simulated_timeline() -> None:
    assert _timeline("gpt2-345m", "1xu280", "lora-q")[1] == []


@pytest.mark.parametrize(("model", "cluster", "why"), [
    ("llama2-7b", "4xu280", "llama2-7b cannot be compiled to DFX programs: it normalizes with "
                            "rmsnorm"),
    ("gpt2-345m", "3xu280", "gpt2-345m on 3 cores: the timing simulator runs the same program"),
])
def test_a_plan_the_simulator_cannot_run_keeps_its_page_and_says_why(model: str, cluster: str,
                                                                    why: str) -> None:
    """The report of a plan DFX cannot program (a RMSNorm model) or the simulator cannot
    step (an uneven split) was refused whole; it now lacks only the simulated layer."""
    _, page = _page(model, cluster)
    titles = [c.title for c in page.charts]
    assert TIMELINE not in titles and "where the time goes" in titles
    (note,) = [n for n in page.notes if n.startswith("no simulated timeline: ")]
    assert note.startswith(f"no simulated timeline: {why}")


CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="no Chromium: run `make browser`")
def test_the_timeline_renders_in_a_browser_one_trace_set_per_core(tiny: str,
                                                                   tmp_path: Path, browser) -> None:
    page = tmp_path / "dfx.html"
    out = RUNNER.invoke(app, ["report", tiny, "--cluster", "4xu280", "--tokens", "8:8",
                              "--out", str(page)])
    assert out.exit_code == 0, out.output
    read = ("(() => { const s = [...document.querySelectorAll('section.chart')].find("
            f"s => s.querySelector('h2').textContent === {json.dumps(TIMELINE)});"
            "const d = s.querySelector('div.plot');"
            "return JSON.stringify({metas: d.data.map(t => t.meta),"
            "drawn: d.querySelectorAll('.trace.bars').length}); })()")
    state = browser.open(page)
    drawn = json.loads(browser.evaluate(read))
    assert state.errors == [] and state.exceptions == []
    assert state.rendered == page.read_text().count('class="plot"')
    metas = drawn["metas"]
    assert sorted(set(metas)) == [f"core {c}" for c in range(4)]
    assert len(metas) == 4 * metas.count("core 0")  # a full set of traces for each core
    assert drawn["drawn"] == len(metas)  # and plotly drew every one
