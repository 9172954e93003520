"""libGalapagos-style emulation: kernels as threads exchanging packets reproduce
transformers' IBertModel (quant_mode, same weights) bit for bit; the router's link counts
match the plan's streams."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.models.zoo import zoo_configs
from archipelago.strategies.galapagos.gmi import HOST, gateway_name
from tests.cli_here import archi_here


def tiny_ibert_config(layers: int = 2) -> dict:
    return {"model_type": "ibert", "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": layers, "intermediate_size": 128, "vocab_size": 97,
            "max_position_embeddings": 66, "type_vocab_size": 1, "hidden_act": "gelu",
            "quant_mode": True, "pad_token_id": 1}


def _config(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def expected_links(plan, seq_len: int) -> Counter:
    """Bytes each FPGA-to-FPGA link carries, from the plan alone: an inter-cluster row
    crosses to the destination's gateway with the one-byte header, then on to its kernel."""
    nodes, links = plan.nodes, Counter()

    def hop(a: int, b: int, nbytes: int) -> None:
        if a != b:
            name = lambda f: "host" if f < 0 else f"fpga{f}"  # noqa: E731
            links[f"{name(a)}->{name(b)}"] += nbytes * seq_len

    for s in plan.streams:
        src, dst = nodes[s.src], nodes[s.dst]
        payload = s.row_bytes * (seq_len if s.per_key else 1)
        if s.inter_cluster and s.dst != HOST:
            gateway = nodes[gateway_name(dst.cluster)]
            hop(src.fpga, gateway.fpga, payload + 1)
            if dst.role != "virtual":
                hop(gateway.fpga, dst.fpga, payload)
        else:
            hop(src.fpga, dst.fpga, payload)
    return links


def _run(plan, seq_len: int) -> dict:
    from archipelago.strategies.galapagos.emulate import emulate_galapagos

    report = emulate_galapagos(plan, seq_len, seed=3)
    assert report["bit_exact"], report["max_abs_diff"]
    links = {k: v["bytes"] for k, v in report["links"].items()}
    assert links == dict(expected_links(plan, seq_len))
    return report


def test_tiny_ibert_through_two_clusters(tmp_path: Path) -> None:
    plan = make_plan(_config(tmp_path, tiny_ibert_config()), "4xsidewinder", "galapagos")
    assert len(plan.clusters) == 2
    report = _run(plan, 5)
    assert report["threads"] == plan.kernel_count - 2 + 1  # no thread per virtual kernel


def test_split_linears_allgather_and_reduce_stay_bit_exact(tmp_path: Path) -> None:
    """Q/K/V by heads, the attention output Linear by column (its input all-gathered),
    the FFN Linears by column and matching row with a GMI reduce of int32 partial sums."""
    plan = make_plan(_config(tmp_path, tiny_ibert_config()), "300xsidewinder", "galapagos",
                     {"utilization": 0.15, "row_interval": 4, "max_seq_len": 8})
    roles = Counter(k.role for k in plan.compute.values() if k.layer == 0)
    assert roles["q"] > 1 and roles["attn_out"] > 1 and roles["ffn_down"] > 1
    kinds = Counter(n.collective for n in plan.nodes.values() if n.role in {"gmi", "virtual"})
    assert {"scatter", "gather", "broadcast", "reduce"} <= set(kinds)
    _run(plan, 7)


def test_one_ibert_base_encoder_is_bit_exact(tmp_path: Path) -> None:
    config = dict(zoo_configs()["ibert-base"], num_hidden_layers=1)
    plan = make_plan(_config(tmp_path, config), "6xsidewinder", "galapagos")
    assert plan.fpgas_needed == 6 and plan.kernel_count == 39
    report = _run(plan, 8)
    assert report["packets"] == 8 * len(plan.streams)  # a row is one packet per stream


def test_integer_kernels_match_transformers_modules() -> None:
    """The fixed-point multiplier and the integer Softmax against transformers' own."""
    from transformers.models.ibert.quant_modules import IntSoftmax, batch_frexp

    from archipelago.strategies.galapagos.emulate.ibert import Requant, int_softmax

    torch.manual_seed(0)
    scales = (torch.rand(64) * 10.0 ** torch.randint(-6, 2, (64,))).float()
    out_scale = torch.tensor([0.37])
    ours = Requant.between(scales, out_scale)
    m, e = batch_frexp((scales.double() / out_scale.double()).view(1, 1, -1))
    assert torch.equal(ours.m, m.double()) and torch.equal(ours.e, e)

    softmax = IntSoftmax(8, quant_mode=True).train()
    scores = torch.randint(-300, 300, (1, 2, 6, 6)).float() * 0.01
    scale = torch.tensor([0.01])
    softmax(scores, scale)  # calibrates the 16-bit range of the exponents
    softmax.eval()
    probs, _ = softmax(scores, scale)
    assert torch.equal(int_softmax(scores, scale, softmax.act.x_min, softmax.act.x_max)
                       * (1 / 256), probs)


def test_only_ibert_in_quant_mode_is_emulated(tmp_path: Path) -> None:
    from archipelago.strategies.galapagos.emulate import emulate_galapagos

    config = dict(tiny_ibert_config(), quant_mode=False)
    plan = make_plan(_config(tmp_path, config), "4xsidewinder", "galapagos")
    with pytest.raises(ArchipelagoError, match="not an I-BERT model in quant_mode"):
        emulate_galapagos(plan, 4)


def test_cli_emulate_reports_links(tmp_path: Path) -> None:
    """In this process: the command's report is checked here; `archi emulate` in a fresh
    interpreter (exit codes, no traceback) is tests/test_emulate*.py's."""
    out = archi_here("emulate", _config(tmp_path, tiny_ibert_config(layers=1)), "--cluster",
                     "2xsidewinder", "--strategy", "galapagos", "--seq-len", "6", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["bit_exact"] is True and report["agrees"] and report["seq_len"] == 6
    assert sum(v["packets"] for v in report["links"].values()) > 0
    assert np.isclose(report["max_abs_diff"], 0.0)
