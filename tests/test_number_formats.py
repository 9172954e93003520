"""Number formats (`--precision`) on the DFX and LORA rings: the shared vocabulary, DSP
packing per format and DSP kind, bytes per format, and one-line refusals."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archipelago.api import plan_and_estimate
from archipelago.engines.dsp_packing import PRODUCTS_PER_DSP, lora_fields, products_per_dsp
from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import catalog
from archipelago.number_formats import FORMATS, GROUP_SIZE, PRECISIONS, canonical
from archipelago.strategies.registry import get_strategy
from tests.cli_here import archi_here
from tests.conftest import TINY_GPT2


def test_the_vocabulary_spells_each_format_once() -> None:
    assert GROUP_SIZE == 128
    # bytes per stored weight: bits / 8, plus a 2-byte FP16 scale per group of 128
    assert FORMATS["w4a16"].weight_bytes == 0.5 + 2 / 128 == 0.515625
    assert FORMATS["w4a8"].weight_bytes == 0.515625
    assert FORMATS["w8a8"].weight_bytes == 1 and FORMATS["fp16"].weight_bytes == 2
    # 8-bit activations quantize the attention's inputs: an 8-bit KV cache; -kv8 asks
    # for one beside 16-bit activations
    assert [FORMATS[n].kv_bytes for n in ("fp16", "fp16-kv8", "w8a8", "w4a16",
                                          "w4a16-kv8", "w4a8", "fp8")] == [2, 1, 1, 2, 1, 1, 1]
    assert "w8a8-kv8" not in FORMATS and "fp8-kv8" not in FORMATS
    assert canonical(" INT8 ") == "w8a8" and canonical("int4") == "w4a16"
    assert PRECISIONS[-2:] == ("int8", "int4")
    with pytest.raises(ArchipelagoError, match=r"^--precision 'w2a16': valid choices are "
                                               r"fp16, fp16-kv8, .*, int4$"):
        canonical("w2a16")


def test_lora_rule_packs_products_by_hand() -> None:
    # seeds/002 §V-A: INT8 activations 16 bits apart in the 27-bit port, products in the
    # 45-bit P: fields at bits 0-15 and 16-31; a third (bits 32-) leaves the port.
    assert lora_fields(27, 45, 8, 8) == 2
    # INT4 weights x INT8 activations: 12-bit fields; a third activation would start at
    # bit 24 and end at 31 > 27.
    assert lora_fields(27, 45, 4, 8) == 2
    # INT4 x INT4: 8-bit fields at 0, 8, 16 (ending at 19 < 27); a fourth ends at 27.
    assert lora_fields(27, 45, 4, 4) == 3
    # 16-bit operands: one field of 32 bits already fills the port.
    assert lora_fields(27, 45, 16, 16) == 1


@pytest.mark.parametrize("kind, w, a, products", [
    ("dsp48e2", 8, 8, 2),  # WP486, seeds/002 §V-A
    ("dsp48e2", 4, 8, 2),  # the same rule, 12-bit fields
    ("dsp48e1", 8, 8, 2),  # 25-bit pre-adder: fields at 0 and 16 still fit
    ("dsp58", 8, 8, 3),  # AM004: three 9 x 8 multipliers in INT8 mode
    ("dsp58", 4, 8, 3),  # INT4 weights sign-extended into the same lanes
    ("intel-vp", 8, 8, 2),  # two 18 x 19 multipliers per block
    ("dsp58", 16, 16, 1),
])
def test_products_per_dsp_by_kind(kind: str, w: int, a: int, products: int) -> None:
    assert products_per_dsp(kind, w, a) == products  # type: ignore[arg-type]


def test_catalog_fpgas_state_their_dsp_kind() -> None:
    fpgas = {k: d.dsp_kind for k, d in catalog().items() if d.kind == "fpga"}
    assert None not in fpgas.values()
    assert fpgas["u280"] == fpgas["u55c"] == "dsp48e2" and fpgas["v80"] == "dsp58"
    assert PRODUCTS_PER_DSP == 2  # Galapagos' and LORA-Q's DSP48E2


def _units(strategy: str, cluster: str, precision: str | None) -> dict:
    given = {"tokens": "32:32", **({"precision": precision} if precision else {})}
    return plan_and_estimate("gpt2-345m", cluster, strategy, given).estimate.devices[0].units


def test_lora_q_array_packs_per_dsp_kind() -> None:
    # LORA-Q's 64 x 64 array (4,096 INT8 products a cycle): two per DSP48E2, three per DSP58
    assert _units("lora-q", "1xu280", None)["mpu"].dsp == 4096 // 2
    assert _units("lora-q", "1xv80", None)["mpu"].dsp == -(-4096 // 3)
    # W4A8: the same packing, plus a group scale's FP16 multiplier per array column
    w4a8 = _units("lora-q", "1xu280", "w4a8")
    assert w4a8["mpu"].dsp == 2048 and w4a8["dequant"].dsp == 64 and w4a8["dequant"].lut == 0


def test_fp16_arrays_widen_four_bit_weights_in_luts() -> None:
    # LORA-F's published 48 x 48 FP16 array takes 48^2 / 2 = 1,152 values a cycle in
    # decode: 1,152 widening lanes of 16 LUTs (INT4 -> FP16), and 48 column scalers of 1 DSP.
    units = _units("lora-f", "1xu280", "w4a16")
    assert units["mpu"].dsp == 48 * 48 * 3  # FP16 multiplier + adder per PE, as fp16
    assert units["dequant"].dsp == 48 and units["dequant"].lut == 1152 * 16
    # an INT8 KV cache beside it: 64 LUTs a lane more (8-input functions, four LUT6s a bit)
    assert _units("lora-f", "1xu280", "w4a16-kv8")["dequant"].lut == 1152 * (16 + 64)
    # DFX: d x l = 64 x 16 values a cycle into the MFU, one scaler per lane
    dfx = _units("dfx", "1xu280", "w4a16")
    assert dfx["dequant"].dsp == 16 and dfx["dequant"].lut == 1024 * 16
    assert "dequant" not in _units("dfx", "1xu280", None)


@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_hbm_bytes_per_format_by_hand(strategy: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_GPT2))
    # One board's HBM: every layer's four matrices, 64 x 192 + 64 x 64 + 64 x 256 + 256 x 64
    # = 49,152 elements, twice, and the tied LM head (97 x 64 = 6,208): 104,512 weights;
    # the KV cache: K and V of 2 layers x 16 tokens x 64 values.
    weights, kv_values = 2 * 49_152 + 97 * 64, 2 * 2 * 16 * 64
    expected = {"fp16": weights * 2 + kv_values * 2,
                "fp16-kv8": weights * 2 + kv_values * 1,
                "w4a16": weights * (0.5 + 2 / 128) + kv_values * 2,
                "w4a16-kv8": weights * (0.5 + 2 / 128) + kv_values * 1}
    for precision, hbm in expected.items():
        est = plan_and_estimate(str(tmp_path), "1xu280", strategy,
                                {"tokens": "8:8", "precision": precision}).estimate
        assert est.devices[0].hbm_bytes == pytest.approx(hbm, rel=1e-12), precision


def test_narrower_weights_speed_an_hbm_bound_decode() -> None:
    """LORA-Q's decode is HBM-bound (seeds/002 §VI-A-d): W4A8's 0.52 bytes a weight
    against W8A8's 1 shorten it; so is the published LORA-F array's (48 x 48 demands 460.8
    GB/s), so W4A16 shortens it too. DFX's FP16 units are compute-bound (seeds/001 §VII):
    W4A16 barely moves it."""
    def latency(strategy: str, precision: str | None) -> float:
        given = {"tokens": "32:256", **({"precision": precision} if precision else {})}
        return plan_and_estimate("gpt2-345m", "1xu280", strategy, given).estimate.latency_s

    assert latency("lora-q", "w4a8") < 0.75 * latency("lora-q", None)
    assert latency("lora-f", "w4a16") < 0.8 * latency("lora-f", None)
    assert latency("dfx", "w4a16") == pytest.approx(latency("dfx", None), rel=0.02)


def test_ring_floors_read_the_format_s_bytes() -> None:
    """The floors of a W4A8 LORA-Q ring read its 0.52-byte weights and INT8 KV cache: below
    the W8A8 ring's in every phase, so its faster estimate is not refused against them."""
    hook = get_strategy("lora-q").plan_kind.hook("floors")
    floors = {}
    for p in ("w8a8", "w4a8"):
        result = plan_and_estimate("gpt2-345m", "1xu280", "lora-q",
                                   {"tokens": "32:256", "precision": p})
        floors[p] = {f.phase: f.floor()[0]
                     for f in hook(result.plan, result.workload, result.estimate)}
    assert all(floors["w4a8"][k] < floors["w8a8"][k] for k in floors["w8a8"])


def _archi(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=300)


def test_cli_plans_lora_q_in_w4a16() -> None:
    run = _archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                 "--tokens", "32:32", "--precision", "w4a16", "--json")
    out = json.loads(run.stdout)
    assert out["precision"] == "w4a16"
    # the INT8-sized 64 x 64 array in FP16 PEs: 3 DSPs each, past the U280's 9,024: a plan
    # that does not fit (exit 1), saying why: 12,288 + the VFU's 15 x 256 - 2 + 64 column
    # scalers = 16,190
    assert out["devices"][0]["units"]["mpu"]["dsp"] == 64 * 64 * 3 and not out["feasible"]
    assert run.returncode == 1 and out["reasons"] == [
        "device 0 (u280): DSP needs 16190, has 9024 (7,166 over)"]
    fits = _archi("plan", "gpt2-345m", "--cluster", "4xu280", "--strategy", "lora-f",
                  "--tokens", "32:32", "--precision", "int4", "--json")
    assert fits.returncode == 0 and json.loads(fits.stdout)["precision"] == "w4a16"
    default = json.loads(_archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy",
                                "lora-q", "--tokens", "32:32", "--json").stdout)
    assert default["precision"] == "w8a8"


@pytest.mark.parametrize("strategy, precision, message", [
    ("dfx", "w8a8", "error: --precision w8a8: DFX computes in FP16 (seeds/001 §V-C), so its "
                    "activations stay 16-bit; it runs fp16, fp16-kv8, w4a16, w4a16-kv8"),
    ("lora-f", "fp8", "error: --precision fp8: LORA has an FP16 or a packed INT8 systolic "
                      "array (seeds/002 §V-A); it runs fp16, fp16-kv8, w8a8, w4a16, "
                      "w4a16-kv8, w4a8"),
    ("lora-q", "w3a16", "error: --precision 'w3a16': valid choices are fp16, fp16-kv8, "
                        "bf16, bf16-kv8, fp8, w8a8, w4a16, w4a16-kv8, w4a8, int8, int4"),
])
def test_a_format_an_engine_cannot_run_is_refused_in_one_line(strategy: str, precision: str,
                                                              message: str) -> None:
    run = archi_here("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", strategy,
                     "--tokens", "8:8", "--precision", precision)  # no fresh interpreter
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [message]


def test_a_name_two_commands_take_is_one_taker_in_a_refusal() -> None:
    """The tensor-parallel kind's --precision is an emulation's job option and a plan's
    format: a refusal names the kind once, with every command that takes it."""
    from archipelago.strategies.options import WorkloadOption, WorkloadType
    from archipelago.strategies.refusals import unknown_option

    work = WorkloadType("generation", (
        WorkloadOption("precision", "ranks' arithmetic", "fp32", role="job",
                       commands=("emulate",)),
        WorkloadOption("precision", "format", "", commands=("plan", "explore"))), "m:f")
    assert unknown_option("precision", "build", "chef", [], [(work, ["dfx", "lora-f"])]) == (
        "--precision applies to generation strategies (dfx, lora-f) in `archi emulate` and "
        "`archi plan` and `archi explore`; strategy 'chef' takes no options in `archi build`")
