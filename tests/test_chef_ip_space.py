"""CHEF's IP candidates grown to the board (issue 34), each bound worked out by hand from
the IP resource model (five DSPs an FP32 MAC, seeds/004 §I; BRAM36 blocks of 512 x 72,
UG573) and the catalog's U280, U250 and V80; the search with them on hacc."""

import pytest

from archipelago.hardware.catalog import catalog
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.device import Resources
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.ip_space import device_candidates, grown
from archipelago.strategies.chef.ip_templates import builtin_ips
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef

IPS = builtin_ips()


def _board(key: str) -> Resources:
    return catalog()[key].resources


@pytest.mark.parametrize(("board", "tm", "dsp"), [
    # 5 x 16 x tm <= DSPs, tm a multiple of 8: U280 9,024 -> 112.8 -> 112; U250 12,288 ->
    # 153.6 -> 152; V80 10,848 -> 135.6 -> 128
    ("u280", 112, 8960), ("u250", 152, 12160), ("v80", 128, 10240)])
def test_a_conv_template_grows_its_output_channels_to_the_board(board, tm, dsp) -> None:
    """conv_16_32 (tn 16, 14 x 14 tiles, k_max 7): BRAM 2 x (16 input banks of 20 x 20 =
    400 words + tm output banks of 196 words, one block each; 7 x 7 weights in LUTRAM)."""
    ip = grown(IPS["conv_16_32"], _board(board))
    assert (ip.name, ip.tn, ip.tm, ip.tr, ip.k_max) == (f"conv_16_32+tm{tm}", 16, tm, 14, 7)
    assert (ip.resources.dsp, ip.resources.bram) == (dsp, 2 * (16 + tm))


@pytest.mark.parametrize(("board", "tn"), [("u280", 200), ("v80", 240)])
def test_a_depthwise_template_grows_its_lanes_to_the_board(board, tn) -> None:
    """dwconv (3 x 3 window, 45 DSPs a lane): U280 9,024 / 45 = 200.5 -> 200; V80 10,848 / 45
    = 241.1 -> 240. Per lane 2 x (an input tile of 29 x 29 = 841 words: 2 blocks, an output
    tile of 196: 1) BRAMs, the 29-word line buffers in LUTRAM."""
    ip = grown(IPS["dwconv_8"], _board(board))
    assert (ip.tn, ip.resources.dsp, ip.resources.bram) == (tn, 45 * tn, 6 * tn)


def test_an_lstm_template_grows_its_macs_and_keeps_its_buffer() -> None:
    """lstm_256: 5 p <= 9,024 -> p <= 1,804.8 -> 1,792 (a multiple of 64); its 1 Mi-word
    buffer stays: ceil(2^20 x 32 / 36,864) + 2 = 913 BRAMs."""
    ip = grown(IPS["lstm_256"], _board("u280"))
    assert (ip.parallel, ip.weight_buffer_words, ip.resources.bram) == (1792, 2**20, 913)


def test_bram_bounds_a_board_short_of_it() -> None:
    """100 BRAMs and DSPs aplenty: six BRAMs a depthwise lane (above) -> 16 lanes."""
    ip = grown(IPS["dwconv_8"], Resources(dsp=100_000, bram=100))
    assert (ip.tn, ip.resources.bram) == (16, 96)


def test_a_template_the_board_cannot_grow_adds_nothing() -> None:
    """conv_32_64 needs 10,240 DSPs: on a U280 (9,024) tm would shrink to 56; lstm_256's
    913 BRAMs exceed a ZC706's 545."""
    assert grown(IPS["conv_32_64"], _board("u280")) is None
    assert grown(IPS["lstm_256"], _board("zc706")) is None


def test_candidates_are_the_templates_then_the_distinct_grown_ones() -> None:
    """On a U280 the four dwconv templates grow to one 200-lane IP, conv_16_16 and conv_16_32
    to one 16 x 112; the templates come first, unchanged."""
    got = device_candidates(IPS.values(), [_board("u280"), _board("u280")])
    assert got[:len(IPS)] == list(IPS.values())
    added = [ip.name for ip in got[len(IPS):]]
    assert added == ["conv_8_16+tm224", "conv_16_16+tm112", "conv_32_32+tm56",
                     "dwconv_8+tn200", "dwconv5_16+tn72", "fc_8_16+tm224", "fc_16_32+tm112",
                     "fc_32_32+tm56", "lstm_64+parallel1792", "lstm_256+parallel1792"]


def test_chef_on_hacc_with_the_grown_ips() -> None:
    """ip_space: device on hacc (a U280 and a U250, seeds/004 §VII-B): casua-surf deploys an
    IP grown past every template and ends faster than on the templates alone; the default
    is the templates, as published."""
    dag, hacc = builtin_dag("casua-surf"), resolve_cluster("hacc")
    published = plan_chef(dag, hacc, ChefConfig())
    grown_plan = plan_chef(dag, hacc, ChefConfig(ip_space="device"))
    assert ChefConfig().ip_space == "templates"
    assert all("+" not in a.ip.name for a in published.deployment.accs)
    assert any("+" in a.ip.name for a in grown_plan.deployment.accs)
    assert grown_plan.latency_s < published.latency_s
    assert "grown to the boards" in ChefConfig(ip_space="device").candidates_source()


def test_an_unknown_ip_space_is_refused_in_one_line() -> None:
    from archipelago.errors import ArchipelagoError
    from archipelago.strategies.registry import get_strategy

    with pytest.raises(ArchipelagoError, match=r"'ip_space' = 'nope': Input should be "
                       r"'templates' or 'device'"):
        get_strategy("chef").config({"ip_space": "nope"})


def test_engine_best_runs_chef_s_search_over_the_grown_candidates() -> None:
    """`plan --engine best` on CHEF is its planner's own search with `ip_space: device`:
    the same plan as that engine config, labelled; the published engine is the templates."""
    from archipelago.api import plan_and_estimate
    from archipelago.explore.best import choose_engine

    chosen = choose_engine("best", "casua-surf", "hacc", "chef", None, {})
    assert chosen.engine == {"ip_space": "device"} and chosen.label.startswith("best")
    best = plan_and_estimate("casua-surf", "hacc", "chef", engine=chosen.engine)
    grown_plan = plan_and_estimate("casua-surf", "hacc", "chef", engine={"ip_space": "device"})
    published = plan_and_estimate("casua-surf", "hacc", "chef")
    assert best.estimate["latency_s"] == grown_plan.estimate["latency_s"]
    assert best.estimate["latency_s"] <= published.estimate["latency_s"]
    assert choose_engine("published", "casua-surf", "hacc", "chef", None, {}).engine is None
