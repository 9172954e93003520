"""`archi emulate --precision w8a8 | w4a16`: the split model with quantized block matrices
computes what the unsplit transformers model with the same quantized weights (and, for
W8A8, the same per-token activation quantization) computes, on 1, 2 and 4 ranks; a split
of input rows agrees on the whole row's scales; what cannot run is refused in one line.

Tiny models whose every matrix has 256 or 1024 input rows, so W4A16's groups of 128
(quant_formats.GROUP_SIZE, the published size, unchanged for the tests) are whole on every
rank of every split here."""

from dataclasses import replace
from typing import Any

import pytest
import torch
import transformers

from archipelago.api import emulate, make_plan
from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.estimate.workload import parse_tokens
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.emulate import emulate as emulate_plan
from archipelago.strategies.tensor_parallel.emulate.program import PROGRAM
from archipelago.strategies.tensor_parallel.emulate.quant_formats import INT32_FAN_IN
from archipelago.strategies.tensor_parallel.emulate.quant_reference import quantize_reference
from archipelago.strategies.tensor_parallel.emulate.quant_shard import refusal
from tests.cli_here import archi_here
from tests.conftest import TINY_GPT2
from tests.test_emulate import (
    FP32_REL_TOL,
    LLAMA,
    NEW,
    SEED,
    TOKENS,
    hf_greedy,
    hf_model,
    row_split_ffn,
    write_config,
)

FORMATS = ("w8a8", "w4a16")
GPT2_W = {**TINY_GPT2, "n_embd": 256, "initializer_range": 0.5}  # FFN 1024
LLAMA_W = {**LLAMA, "hidden_size": 256, "intermediate_size": 512, "initializer_range": 0.1}
LAYERS = GPT2_W["n_layer"]
# Both sides multiply the same INT8 (or exactly dequantized INT4) weights; W8A8's INT32
# sums are exact and both sides quantize the same activations with the same scales, so the
# split differs from the reference only as any FP32 run does: by reduction order (our
# matmuls against transformers' fused addmm), ~sqrt(K)·u relative per dot product.
# FP32_REL_TOL (test_emulate) bounds that for K <= 256; FFN2's K = 1024 here doubles
# sqrt(K), hence 2x. An FP32 difference that met an INT8 rounding boundary would move one
# activation of one token by a whole step (1/127 of its row's maximum, ~5e-4 of that
# matmul's output): the tolerance admits no such flip, and the quantization itself (the
# FP32 model's distance from the quantized one, asserted below) is over 1000 times it.
REL_TOL = 2 * FP32_REL_TOL


def quantized_model(path: str, config: dict[str, Any], precision: str
                    ) -> transformers.PreTrainedModel:
    """The unsplit model built here from the config (written at `path`) and seed, its
    block matrices then quantized in `precision`."""
    model = hf_model(config, SEED)
    quantize_reference(model, resolve_model(path), precision)
    return model


def along(model: transformers.PreTrainedModel, prompt: list[int], tokens: list[int]
          ) -> torch.Tensor:
    """`model`'s logits at each generation step, fed `tokens`."""
    ids = torch.tensor([prompt + tokens[:-1]])
    with torch.inference_mode():
        return model(ids).logits[0, len(prompt) - 1:]


@pytest.fixture(scope="module")
def gpt2_w(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_config(tmp_path_factory.mktemp("gpt2-w"), GPT2_W)


@pytest.fixture(scope="module")
def runs(gpt2_w: str) -> dict[tuple[str, int], dict[str, Any]]:
    """One DFX emulation per (format, ranks)."""
    return {(precision, ranks): emulate(gpt2_w, f"{ranks}xu280", "dfx",
                                        {"tokens": TOKENS, "precision": precision}, seed=SEED)
            for precision in FORMATS for ranks in (1, 2, 4)}


def held_bytes(precision: str, ranks: int) -> int:
    """One rank's bytes under DFX's split of GPT2_W, by hand: the block matrices' slices in
    the format (W8A8: a byte a weight, an FP32 scale per column; W4A16: half a byte a
    weight, an FP16 scale and a one-byte zero point per column of each group of 128),
    everything else FP32 (biases split with their columns, the rest replicated)."""
    h, vocab, positions = GPT2_W["n_embd"], GPT2_W["vocab_size"], GPT2_W["n_positions"]
    matrices = [(h, 3 * h), (h, h), (h, 4 * h), (4 * h, h)]  # (in, out): c_attn .. c_proj
    block = 0
    for fan_in, fan_out in matrices:
        cols = fan_out // ranks
        if precision == "w8a8":
            block += fan_in * cols + 4 * cols
        else:
            block += fan_in * cols // 2 + (fan_in // 128) * cols * (2 + 1)
        block += 4 * cols  # its bias slice
    block += 4 * 4 * h  # two LayerNorms' weight and bias
    return LAYERS * block + 4 * ((vocab + positions) * h + 2 * h)  # tables, final norm


@pytest.mark.parametrize("precision", FORMATS)
def test_split_computes_what_the_quantized_unsplit_model_computes(runs, gpt2_w,
                                                                  precision) -> None:
    model = quantized_model(gpt2_w, GPT2_W, precision)
    fp32 = hf_model(GPT2_W, SEED)
    for ranks in (1, 2, 4):
        report = runs[precision, ranks]
        expected, scale = hf_greedy(model, report["prompt"])
        assert len(set(expected)) > 3  # not one repeated token
        assert report["generated"] == expected == report["reference"], ranks
        assert report["tokens_match"] and report["agrees"] and report["precision"] == precision
        assert report["max_abs_logit_diff"] <= REL_TOL * scale, (ranks, report)
        assert report["bytes_per_rank"] == [held_bytes(precision, ranks)] * ranks
        assert report["collectives"] == {"all_gather": 4 * LAYERS * NEW}  # DFX's, no more
    # The quantization is not lost in the tolerance: the FP32 model is far from it.
    quantized, plain = along(model, report["prompt"], expected), along(fp32, report["prompt"],
                                                                       expected)
    assert (quantized - plain).abs().max() > 1000 * REL_TOL * scale


def test_w8a8_integers_are_the_same_on_every_split(runs) -> None:
    """A digest of every INT32 accumulator, additive over ranks (compute._digest)."""
    digests = {runs["w8a8", n]["integer_checksum"] for n in (1, 2, 4)}
    assert len(digests) == 1 and None not in digests
    assert runs["w4a16", 1]["integer_checksum"] is None  # no integer products


@pytest.fixture(scope="module")
def llama_w(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_config(tmp_path_factory.mktemp("llama-w"), LLAMA_W)


def row_split_plan(config: str, ranks: int) -> Any:
    """DFX with FFN2 split by input rows, its partial sums all-reduced (Megatron-LM's)."""
    staged = make_plan(config, f"{ranks}xu280", "dfx")
    return replace(staged, stages=[replace(staged.stages[0],
                                           program=row_split_ffn(staged.program))])


@pytest.mark.parametrize("precision", FORMATS)
def test_a_row_split_agrees_on_the_whole_rows_scales(llama_w, precision) -> None:
    """FFN2's 512 input rows on 2 ranks (256 each: two whole W4A16 groups). W8A8 ranks
    all-reduce each FFN2 column's weight maximum once, at load, and each token's input
    maximum before every FFN2 product."""
    job = EmulationJob(parse_tokens(TOKENS), seed=SEED, precision=precision)
    plan = row_split_plan(llama_w, 2)
    report = emulate_plan(plan, job)
    layers = LLAMA_W["num_hidden_layers"]
    maxima = {"absmax_all_reduce": layers * (1 + NEW)} if precision == "w8a8" else {}
    assert report["collectives"] == {"all_gather": 2 * layers * NEW,
                                     "all_reduce": layers * NEW, **maxima}
    # the progress bar's count per token: all of them but the load's
    per_token, tokens = PROGRAM.pace(plan, job, 0)
    assert (per_token * tokens == sum(report["collectives"].values())
            - layers * (precision == "w8a8"))
    expected, scale = hf_greedy(quantized_model(llama_w, LLAMA_W, precision),
                                report["prompt"])
    assert report["generated"] == expected and report["tokens_match"]
    assert report["max_abs_logit_diff"] <= REL_TOL * scale


def test_w4a16_refuses_groups_across_ranks(tmp_path) -> None:
    """FFN2's 384 input rows on 2 ranks are 192 each: a group of 128 would straddle."""
    config = write_config(tmp_path, {**LLAMA_W, "intermediate_size": 384})
    job = EmulationJob(parse_tokens(TOKENS), seed=SEED, precision="w4a16")
    with pytest.raises(EmulationError, match=r"^--precision w4a16 on 2 ranks: rank 0 holds "
                       r"input rows 0\.\.192 of \S+ ffn_down\.weight, 192 wide, "
                       r"not whole groups of 128$"):
        emulate_plan(row_split_plan(config, 2), job)


@pytest.mark.parametrize(("args", "message"), [
    (("--precision", "w4a8"), "unknown precision 'w4a8'; valid choices: fp16, fp32, w4a16, "
                              "w8a8"),
    (("--precision", "w4a16"), "--precision w4a16: {model} q.weight has 64 input rows, not a "
                               "multiple of the group size 128"),
    (("--precision", "w8a8", "--strategy", "lora-q"),
     "--precision w8a8: lora-q runs its own w8a8 (SmoothQuant-O3 static scales, seeds/002 "
     "§IV-B); it takes fp32 or fp16"),
])
def test_what_cannot_run_is_refused_in_one_line(tmp_path, args, message) -> None:
    """In this process: the refusal is what is checked (two of them import torch first, 2 s
    of CPU in a fresh interpreter); an emulation's errors as one line from a fresh process
    are test_emulate_failures' CLI test."""
    config = write_config(tmp_path, TINY_GPT2)
    out = archi_here("emulate", config, "--cluster", "2xu280", "--tokens", "4:4", *args)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    line = message.format(model=resolve_model(config).name)
    assert out.stderr.count("\n") == 1 and line in out.stderr, out.stderr


def test_w8a8_bounds_the_int32_sums(tmp_path) -> None:
    """An FFN2 of INT32_FAN_IN input rows runs; two more would overflow INT32 (the bound
    `refusal` checks before any rank starts)."""
    for ffn, refused in ((INT32_FAN_IN, False), (INT32_FAN_IN + 2, True)):
        config = write_config(tmp_path / str(ffn), {**LLAMA_W, "intermediate_size": ffn})
        plan = make_plan(config, "2xu280", "dfx").program
        expected = (f"--precision w8a8: {plan.spec.name} ffn_down.weight sums {ffn} products "
                    f"per output, more than the {INT32_FAN_IN} an INT32 accumulator holds "
                    "exactly") if refused else None
        assert refusal(plan, "w8a8") == expected
        assert refusal(plan, "fp32") is None
