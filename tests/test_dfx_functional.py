"""The DFX functional simulator (dfx_program/functional.py): the compiled per-core programs
run on FP16 values for a tiny GPT-2 on 1, 2 and 4 cores, against transformers' model with
the same weights and against the multi-process emulation; and its parts (FP16 accumulation
order, the GELU table, the HBM image) against hand-computed cases."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from archipelago.api import emulate
from archipelago.strategies.tensor_parallel.dfx_program import fp16
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.functional import (
    FunctionalRun,
    SimulationError,
    run_functional,
    simulate,
)
from archipelago.strategies.tensor_parallel.dfx_program.host import (
    checkpoint_weights,
    load_image,
)
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    Dma,
    Instr,
    Loc,
    Router,
    RouterOp,
    Section,
)
from archipelago.strategies.tensor_parallel.dfx_program.memory import memories
from tests.conftest import TINY_GPT2
from tests.rings import make_ring

# initializer_range 0.2: varied greedy tokens (a wrong KV cache or position cannot hide
# behind one repeated token) while every activation stays far inside FP16's range.
CONFIG = {**TINY_GPT2, "initializer_range": 0.2}
SEED, PROMPT, NEW = 3, 8, 12
# FP16 keeps 11 significant bits, u = 2**-11 ~ 4.9e-4, and DFX rounds after every operator
# (seeds/001 §VII-A). The longest accumulation, FFN2's 256-long dot product, rounds each
# product, six adder-tree levels and four tile-row adds; independent roundings add like a
# random walk, ~sqrt(K)·u of the terms' scale (K = 256: 16u ~ 0.8%), and each of the two
# layers adds its own: 2·sqrt(256)·u ~ 1.6% of a quantity's largest magnitude.
FP16_REL_TOL = 2 * 256 ** 0.5 * 2.0 ** -11


def _random_vectors(model: transformers.PreTrainedModel, seed: int) -> None:
    """transformers initializes biases to 0 and LayerNorm to (1, 0), which would hide a bias
    or a gamma/beta the simulator mixed up: draw them instead."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if ".ln_" in f".{name}" and name.endswith("weight") else 0.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=gen))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = dict(CONFIG)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(hf_config).eval()
    _random_vectors(model, SEED)
    directory = tmp_path_factory.mktemp("tiny-gpt2-dfx")
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def reference(checkpoint: Path) -> transformers.PreTrainedModel:
    return transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()


@pytest.fixture(scope="module")
def prompt() -> list[int]:
    """The emulation's prompt for SEED (tensor_parallel/emulate's prompt_ids)."""
    gen = torch.Generator().manual_seed(SEED)
    return torch.randint(CONFIG["vocab_size"], (PROMPT,), generator=gen).tolist()


@pytest.fixture(scope="module")
def weights(checkpoint: Path) -> dict[str, np.ndarray]:
    return checkpoint_weights(make_ring(str(checkpoint), "1xu280", "dfx").spec, checkpoint)


@pytest.fixture(scope="module", params=[1, 2, 4])
def cores(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture(scope="module")
def run(cores: int, checkpoint: Path, weights, prompt) -> FunctionalRun:
    plan = make_ring(str(checkpoint), f"{cores}xu280", "dfx")
    return run_functional(plan, weights, prompt, NEW)


def _reference_pass(model: transformers.PreTrainedModel, prompt: list[int],
                    tokens: list[int]) -> Any:
    """transformers' logits and hidden states along the simulator's own token path."""
    ids = torch.tensor([prompt + tokens[:-1]])
    with torch.inference_mode():
        return model(ids, output_hidden_states=True)


def test_tokens_equal_transformers_and_the_emulation(run, cores, checkpoint, reference,
                                                      prompt) -> None:
    ids = torch.tensor([prompt])
    expected = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                  max_new_tokens=NEW, min_new_tokens=NEW, eos_token_id=None,
                                  pad_token_id=0)[0, PROMPT:].tolist()
    assert len(set(expected)) > 3  # not one repeated token
    assert run.tokens == expected
    report = emulate(str(checkpoint), f"{cores}xu280", "dfx",
                     {"tokens": f"{PROMPT}:{NEW}", "checkpoint": str(checkpoint)}, seed=SEED)
    assert report["prompt"] == prompt
    assert run.tokens == report["generated"]
    # the router moved what the emulation's all-gathers put on a ring link (fp32 there)
    link = report["bytes_per_link"].get("all_gather", 0) // 4
    assert run.router_values == [link] * cores


def _rel_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def test_logits_and_every_layer_within_fp16_tolerance(run, reference, prompt) -> None:
    """Each decoder layer's output at every position, the final LayerNorm's output and the
    LM head's values, against transformers in fp32; and no greedy choice is a near tie the
    FP16 error could have flipped (the tokens agree for a reason)."""
    out = _reference_pass(reference, prompt, run.tokens)
    hidden = [h[0].numpy() for h in out.hidden_states]  # embeddings, layer 0, ln_f(layer 1)
    layers = CONFIG["n_layer"]
    assert run.hidden.shape == (PROMPT + NEW - 1, layers, CONFIG["n_embd"])
    for layer in range(layers - 1):  # transformers' last entry is after ln_f
        assert _rel_error(run.hidden[:, layer], hidden[layer + 1]) <= FP16_REL_TOL
    assert _rel_error(run.head_input, hidden[layers][PROMPT - 1:]) <= FP16_REL_TOL
    logits = out.logits[0, PROMPT - 1:].numpy()
    assert _rel_error(run.logits, logits) <= FP16_REL_TOL
    top2 = np.sort(logits, axis=1)[:, -2:]
    assert np.all(top2[:, 1] - top2[:, 0] > 2 * np.abs(run.logits - logits).max())


def test_the_ring_computes_what_one_core_computes(run, checkpoint, weights, prompt) -> None:
    """Every column is computed the same way on whichever core holds it, and the syncs
    gather them exactly: bit-identical values on any core count."""
    one = run_functional(make_ring(str(checkpoint), "1xu280", "dfx"), weights, prompt, NEW)
    assert np.array_equal(run.hidden, one.hidden)
    assert np.array_equal(run.logits, one.logits)


def test_a_wrong_layer_shows_beyond_the_tolerance(checkpoint, weights, reference,
                                                  prompt) -> None:
    """FFN2 of layer 1 with weights 5% too large: the greedy tokens do not change (argmax
    hides it), the logits comparison above does not let it pass."""
    plan = make_ring(str(checkpoint), "2xu280", "dfx")
    name = "layers.1.ffn_down.weight"
    right = run_functional(plan, weights, prompt, NEW)
    wrong = run_functional(plan, {**weights, name: weights[name] * 1.05}, prompt, NEW)
    assert wrong.tokens == right.tokens
    logits = _reference_pass(reference, prompt, wrong.tokens).logits[0, PROMPT - 1:].numpy()
    assert _rel_error(wrong.logits, logits) > FP16_REL_TOL


def _without(section: Section, drop: Callable[[Instr], bool]) -> Section:
    keep = [k for k, i in enumerate(section.instrs) if not drop(i)]
    return Section(section.name, tuple(section.instrs[k] for k in keep),
                   tuple(section.notes[k] for k in keep))


def test_a_matrix_instruction_without_its_dma_is_refused(checkpoint, weights,
                                                         prompt) -> None:
    plan = make_ring(str(checkpoint), "1xu280", "dfx")
    programs, maps = compile_plan(plan, PROMPT, NEW)
    layer = programs[0].layer
    first = next(i for i in layer.instrs if isinstance(i, Dma) and i.dst_loc == Loc.WBUF)
    cut = _without(layer, lambda i: i is first)
    with pytest.raises(SimulationError, match="weight buffer streams"):
        simulate(plan, [replace(programs[0], layer=cut)], maps, weights, prompt)


def test_a_receive_nobody_sends_is_a_deadlock(checkpoint, weights, prompt) -> None:
    """Core 0 of 2 without its router sends: core 1's first receive waits forever, and
    core 0 reaches its own receive, which core 1 never gets to send for."""
    plan = make_ring(str(checkpoint), "2xu280", "dfx")
    programs, maps = compile_plan(plan, PROMPT, NEW)
    mute = _without(programs[0].layer,
                    lambda i: isinstance(i, Router) and i.op == RouterOp.SEND)
    with pytest.raises(SimulationError, match="deadlock"):
        simulate(plan, [replace(programs[0], layer=mute), programs[1]], maps, weights, prompt)


def test_weights_land_in_hbm_through_the_tiled_layout(checkpoint, weights, prompt) -> None:
    """Core 1 of 2: every value of its layer-1 Query shard, located element by element by
    MemoryMap.address and Tiling.channel_of, is the FP16 weight in that HBM channel."""
    plan = make_ring(str(checkpoint), "2xu280", "dfx")
    _, maps = compile_plan(plan, PROMPT, NEW)
    memory_map = maps[1]
    mems = memories(memory_map)
    load_image(plan, 1, memory_map, mems, weights, 1e-5, prompt)
    shard = plan.devices[1].layer_shards["q.weight"]
    want = weights["layers.1.q.weight"][:, shard.start:shard.stop].astype(np.float16)
    channels = [mems["hbm"].channel(c) for c in range(memory_map.tiling.channels)]
    for (r, c), value in np.ndenumerate(want):
        channel, offset = memory_map.tiling.channel_of(memory_map.address("q.weight", r, c, 1))
        assert channels[channel][offset // 2] == value.view(np.uint16)
    tiling = memory_map.tiling  # one d x l tile is one beat of every channel
    assert {tiling.channel_of(memory_map.address("q.weight", r, c, 1))[0]
            for r in range(tiling.d) for c in range(tiling.l)} == set(range(tiling.channels))


def test_fp16_matvec_rounds_in_the_adder_tree_order() -> None:
    """d = 2, x = 1s, one column (2048, 1, 1, 1): tile row 0's tree gives 2048 + 1 = 2049,
    a tie between FP16's 2048 and 2050, rounded to even: 2048; tile row 1 gives 2; the
    scalar adder: 2048 + 2 = 2050. Exact (fp32) arithmetic gives 2051; summing the column
    in order in FP16 gives 2048 (each + 1 rounds away)."""
    x = np.ones(4, np.float16)
    w = np.array([[2048], [1], [1], [1]], np.float16)
    assert fp16.matvec(x, w, 2)[0] == 2050
    assert fp16.matvec(x, w, 2, bias=np.array([1.0], np.float16))[0] == 2050  # 1 + 2048
    assert fp16.accum(np.array([2048, 1, 1, 1], np.float16), 2, mean=False) == 2050


def test_gelu_table_within_fp16_rounding_of_gelu_new() -> None:
    """2048 linear segments of width h = 2**-7: interpolation error <= h**2 / 8 · max|f''|
    (~0.8) ~ 6e-6, below FP16's rounding of the result (the sample's, the product's and
    the sum's half ulps: at most 2 ulps with the 1e-4 the interpolation and subnormals
    add); identity above 8, zero below -8."""
    x = np.linspace(-10, 10, 20001).astype(np.float16)
    got = fp16.gelu(x, "gelu_new").astype(np.float64)
    xd = x.astype(np.float64)
    want = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - want) <= 2 * ulp + 1e-4)
    assert np.all(got[xd >= 8] == xd[xd >= 8]) and np.all(got[xd < -8] == 0)
