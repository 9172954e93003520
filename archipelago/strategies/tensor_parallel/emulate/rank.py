"""What every emulated rank of a tensor-parallel plan needs: the checks before any process
starts, its shard loaded into its state, the weights every rank reads, and the report head
rank 0 writes against transformers (program.py walks the stages with them)."""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from archipelago.emulate.errors import EmulationError
from archipelago.emulate.exchange import Exchange
from archipelago.emulate.job import QUANTIZED_PRECISIONS, EmulationJob
from archipelago.errors import elide_path
from archipelago.models.hf_state_dict import named_archs, state_dict_names
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, all_weights
from archipelago.models.zoo import resolve_model
from archipelago.safe_read import is_dir
from archipelago.strategies.registry import feature_refusal
from archipelago.strategies.tensor_parallel.emulate.checkpoint import CheckpointReader, load_shard
from archipelago.strategies.tensor_parallel.emulate.comm_steps import COMM
from archipelago.strategies.tensor_parallel.emulate.compute import ACTIVATIONS, COMPUTE
from archipelago.strategies.tensor_parallel.emulate.numerics import numerics
from archipelago.strategies.tensor_parallel.emulate.quant_formats import W8A8
from archipelago.strategies.tensor_parallel.emulate.quant_shard import (
    ABSMAX_REDUCE,
    quantize_shard,
    refusal,
)
from archipelago.strategies.tensor_parallel.emulate.quantized import read_scales
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.emulate.w8a8 import quantize
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, DevicePlan, Plan
from archipelago.strategies.tensor_parallel.planning.heads import even

# How often the launcher's reference thread looks for the ranks' new tokens: a small share
# of a decode step (0.16 s on 4 ranks, gpt2-345m, issue 36), and seldom enough that its
# wake-ups do not preempt ranks that run in lock-step on two cores.
TOKEN_POLL_S = 0.02
# The float arithmetic of each --precision: the quantized formats keep FP32 outside their
# matrices (and W4A16's activations), so they differ from the FP32 reference only there.
DTYPES = {"fp32": torch.float32, "fp16": torch.float16,
          **dict.fromkeys(QUANTIZED_PRECISIONS, torch.float32)}


def prompt_ids(spec: ModelSpec, length: int, seed: int) -> torch.Tensor:
    """Prompt token ids drawn from `seed` alone, so every rank and the reference agree."""
    return torch.randint(spec.vocab, (length,), generator=torch.Generator().manual_seed(seed))


def _check_checkpoint(spec: ModelSpec, directory: Path) -> None:
    if not is_dir(directory, "--checkpoint"):  # a name too long is one line too
        raise EmulationError(f"--checkpoint {elide_path(str(directory))}: not a directory")
    saved = resolve_model(str(directory))
    fields = {"name", "hf_config"}
    if saved.model_dump(exclude=fields) != spec.model_dump(exclude=fields) or (
            numerics(saved) != numerics(spec)):
        raise EmulationError(f"--checkpoint {directory}: its config.json describes a different "
                             f"model than {spec.name}; pass the checkpoint directory as MODEL")
    with CheckpointReader(directory) as reader:  # opened here: a bad file is named now
        reader.check(spec)


def check(plan: Plan, job: EmulationJob) -> None:
    """Everything that would stop a rank, found before any process starts."""
    spec = plan.spec
    if not spec.is_decoder or state_dict_names(spec) is None:
        raise EmulationError(f"{spec.name}: generation is emulated for "
                             f"{', '.join(named_archs())} decoders, not '{spec.arch}'")
    refused = feature_refusal(spec, plan.strategy, "emulate")
    if refused:  # e.g. shared experts, which the planner splits
        raise EmulationError(refused)
    if (spec.moe or spec.mla) and plan.numerics == "w8a8":
        raise EmulationError(f"{spec.name}: W8A8 "
                             f"{'experts' if spec.moe else 'latent attention'} not emulated")
    if spec.moe and spec.moe.shared_gate:
        raise EmulationError(f"{spec.name}: a sigmoid-gated shared expert is not emulated")
    if spec.embed_proj_dim:
        raise EmulationError(f"{spec.name}: word_embed_proj_dim {spec.embed_proj_dim} != hidden "
                             "size needs project_in/project_out ops the plan does not have")
    if spec.activation not in ACTIVATIONS:
        raise EmulationError(f"{spec.name}: activation '{spec.activation}' is not emulated; "
                             f"known: {', '.join(ACTIVATIONS)}")
    if not even(spec, plan.ranks):
        raise EmulationError(f"{spec.name} on {plan.ranks} ranks: emulation runs even splits "
                             f"only (heads {spec.heads}, key/value heads {spec.kv_heads}, hidden "
                             f"{spec.hidden}, FFN {spec.ffn} each a multiple of the ranks, or "
                             "the ranks a multiple of the key/value heads); the estimate costs "
                             "uneven splits")
    numerics(spec)
    steps = [*plan.embed_steps, *plan.output_steps,
             *(s for layer in range(spec.layers) for rows in (1, 2)
               for s in plan.layer_steps(rows, layer))]
    missing = sorted({s.op.kind for s in steps if isinstance(s, ComputeStep)} - set(COMPUTE)
                     | {s.kind for s in steps if isinstance(s, CommStep)} - set(COMM))
    if missing:
        raise EmulationError(f"plan '{plan.scheme}' uses step kinds with no emulator handler: "
                             f"{', '.join(missing)}")
    gathers = any(isinstance(s, CommStep) and s.kind == "argmax_gather"
                  for s in plan.output_steps)
    whole = all(d.vocab_slice == (0, spec.vocab) for d in plan.devices)
    if not (gathers or whole):
        raise EmulationError(f"plan '{plan.scheme}' splits the vocabulary but has no "
                             "argmax_gather to pick tokens with")
    refused = refusal(plan, job.precision)
    if refused:
        raise EmulationError(refused)
    work = job.workload
    if work.total_tokens > spec.max_positions:
        raise EmulationError(f"--tokens {work.input_tokens}:{work.output_tokens}: "
                             f"{work.total_tokens} tokens exceed "
                             f"{spec.name}'s {spec.max_positions} positions")
    if job.checkpoint is not None:
        if spec.moe and numerics(spec).routing:
            raise EmulationError(f"{spec.name}: --checkpoint of a group-routed MoE is not "
                                 "emulated (its e_score_correction_bias buffer is not read; "
                                 "seeded weights hold transformers' zeros)")
        _check_checkpoint(spec, Path(job.checkpoint))


def _converter(dtype: torch.dtype, scales: dict[str, tuple[float, float]] | None
               ) -> Callable[[WeightTensor, torch.Tensor], torch.Tensor]:
    """Block matrices of a W8A8 plan become int8 with their whole tensor's scale; every
    other tensor takes the run's dtype."""

    def convert(tensor: WeightTensor, data: torch.Tensor) -> torch.Tensor:
        if scales is not None and tensor.name in scales:
            return quantize(data, scales[tensor.name][0])
        return data.to(dtype)

    return convert


def rank_state(plan: Plan, job: EmulationJob, device: DevicePlan, exchange: Exchange,
               tensors: Iterable[WeightTensor] | None = None
               ) -> tuple[RankState, dict[str, int]]:
    """`device`'s shard loaded (of `tensors` only, when given: a pipeline stage's) and the
    state a rank interprets the plan with; and the bytes it holds in each memory."""
    spec, directory = plan.spec, Path(job.weights_dir)
    scales = read_scales(directory) if plan.numerics == "w8a8" else None
    with CheckpointReader(directory) as reader:
        shard = load_shard(spec, device, reader, _converter(DTYPES[job.precision], scales),
                           tensors)
    quantized = {} if job.precision not in QUANTIZED_PRECISIONS else quantize_shard(
        job.precision, spec, device, shard,
        lambda t, what: exchange.all_reduce(t, ABSMAX_REDUCE, what, dist.ReduceOp.MAX))
    offsets = {t.name: device.shard_for(t).start for t in all_weights(spec)
               if scales is not None and t.name in scales}
    rs = RankState(spec, shard.weights, numerics(spec), exchange, device.vocab_slice,
                   device.columns(spec.hidden), device.ranks, scales, offsets,
                   quantized=quantized)
    return rs, shard.bytes_by_memory


@dataclass
class Reference:
    """The unsplit transformers model with the run's weights, and, when the launcher had a
    core to spare for it while the ranks started, its greedy tokens and the logits along
    them (`greedy`); or, once the ranks had published all tokens but the last, the logits
    along the emulated path (`along`: the tokens fed after the prompt, and the logits)."""

    model: Any
    prompt: torch.Tensor
    greedy: tuple[list[int], torch.Tensor] | None = None
    along: tuple[list[int], torch.Tensor] | None = None


def prepare_reference(plan: Plan, job: EmulationJob, idle: Callable[[], bool],
                      tokens: Callable[[], tuple[list[int], bool]] | None = None
                      ) -> Reference:
    """The reference, prepared by the launcher in a thread while the ranks start and run:
    the model loaded (its weights the checkpoint's file-backed pages, which the ranks'
    shards read too) and quantized as the run's precision is. While `idle()` (a core to
    spare: the ranks' fork server still importing torch, 1.3-3 s of one core) it decodes
    greedily too, and where the emulated tokens agree with all of it no pass is left for
    after the ranks; stopped before the end, the pass runs (a decode step streams all the
    weights as the whole pass does: steps beside running ranks would take their cores).
    That pass runs here as soon as `tokens()` (the ranks' tokens so far, and whether they
    are done) holds the ones it feeds, all but the last: beside the ranks' last decode step
    and exit, on cores they leave idle then, instead of after them (0.38 s of a 2.2 s
    4-rank run, gpt2-345m 8:8, issue 36); the same call on the same threads, so the same
    logits as report_head's own."""
    from archipelago.strategies.tensor_parallel.emulate import (
        reference,  # transformers loads only where results meet
    )
    from archipelago.strategies.tensor_parallel.emulate.quant_reference import (
        quantize_reference,
    )

    work = job.workload
    prompt = prompt_ids(plan.spec, work.input_tokens, job.seed)
    with reference.half_the_cores():
        model = reference.load_model(Path(job.weights_dir))
        if job.precision in QUANTIZED_PRECISIONS:
            quantize_reference(model, plan.spec, job.precision)
        greedy = reference.greedy_while(model, prompt, work.output_tokens, idle)
        along = None if greedy is not None or tokens is None else _along_when_known(
            model, prompt, work.output_tokens - 1, tokens)
    return Reference(model, prompt, greedy, along)


def _along_when_known(model: Any, prompt: torch.Tensor, feeds: int,
                      tokens: Callable[[], tuple[list[int], bool]]
                      ) -> tuple[list[int], torch.Tensor] | None:
    """reference.logits_along over the first `feeds` emulated tokens once `tokens()` has
    them (polled: a rank publishes each token as it picks it), or None where the ranks end
    without them."""
    from archipelago.strategies.tensor_parallel.emulate import reference

    while True:
        known, done = tokens()
        if len(known) >= feeds:
            fed = known[:feeds]
            return fed, reference.logits_along(model, prompt, fed)
        if done:
            return None
        time.sleep(TOKEN_POLL_S)


def report_head(plan: Plan, job: EmulationJob, ranks: list[dict[str, Any]],
                scorers: list[dict[str, Any]], ref: Reference) -> dict[str, Any]:
    """What every emulation report opens with: the run, the generated tokens and logits of
    the ranks that scored them (`scorers`) against the unsplit transformers model with the
    same weights (`ref`: fp32 reference logits along the emulated token path, greedy
    tokens transformers' generate() picks), and the bytes each rank held.
    Where the reference decoded ahead (`ref.greedy`: generate()'s steps, so its tokens) and
    the emulated tokens are its tokens, its logits are the ones along the emulated path;
    where they part, its tokens are the reference's. Otherwise one forward pass over the
    emulated path gives both where the paths agree: generate() picks each token as the
    argmax of these logits once its prefix is the same, so if every emulated token is that
    argmax, generate()'s path is the emulated one (by induction from the prompt). Only
    where they part does generate() run, to report its own tokens: its sequential decode
    steps cost gpt2-345m 8:8 2.5-3x the one pass (one thread, 2-core machine, 2026-11-28)."""
    from archipelago.strategies.tensor_parallel.emulate import reference

    tokens = scorers[0]["tokens"]
    slices = {tuple(r["vocab_slice"]): r["logits"] for r in scorers}  # a whole head: one
    logits = torch.cat([slices[k] for k in sorted(slices)], dim=-1)
    assert logits.shape[-1] == plan.spec.vocab, tuple(logits.shape)
    prompt = ref.prompt
    if ref.greedy is not None and ref.greedy[0] == tokens:
        expected, along = ref.greedy
    else:
        with reference.half_the_cores():
            along = (ref.along[1] if ref.along is not None and ref.along[0] == tokens[:-1]
                     else reference.logits_along(ref.model, prompt, tokens[:-1]))
            expected = (ref.greedy[0] if ref.greedy is not None
                        else tokens if along.argmax(dim=-1).tolist() == tokens
                        else reference.greedy_generate(ref.model, prompt,
                                                       job.workload.output_tokens))
    return {
        "model": plan.spec.name, "cluster": plan.cluster.name, "strategy": plan.strategy,
        "ranks": plan.ranks, "precision": job.precision, "numerics": plan.numerics,
        "integer_checksum": (f"{sum(r['integer_checksum'] for r in ranks) % 2 ** 64:016x}"
                             if W8A8 in (plan.numerics, job.precision) else None),
        "weights": job.checkpoint or f"random, seed {job.seed}",
        "prompt": prompt.tolist(), "generated": tokens, "reference": expected,
        "tokens_match": tokens == expected, "agrees": tokens == expected,
        "max_abs_logit_diff": float((logits - along).abs().max()),
        "bytes_per_rank": [sum(r["bytes_by_memory"].values()) for r in ranks],
        "bytes_per_rank_by_memory": [r["bytes_by_memory"] for r in ranks],
    }


def busiest_links(ranks: list[dict[str, Any]], kinds: Iterable[str]) -> dict[str, float]:
    """Bytes one link carried over the whole run, by kind: the busiest rank's outgoing link
    (exchange.py says how a ring moves each collective kind)."""
    return {kind: max(r["link_bytes"].get(kind, 0) for r in ranks) for kind in kinds}


def provide_weights(plan: Plan, job: EmulationJob, run_dir: Path | None) -> EmulationJob:
    """The job reading the user's checkpoint or seeded weights, W8A8-prepared where the plan
    runs int8: written under `run_dir` when this machine starts the ranks, into the shared
    cache under torchrun (`run_dir` None), where every rank prepares the same files."""
    from archipelago.strategies.tensor_parallel.emulate.quantized import prepare_w8a8
    from archipelago.strategies.tensor_parallel.emulate.reference import (
        cached_directory,
        cached_seeded_checkpoint,
        save_seeded_checkpoint,
    )

    if job.checkpoint is not None:
        weights = Path(job.checkpoint)
    elif run_dir is None:
        weights = cached_seeded_checkpoint(plan.spec, job.seed)
    else:
        weights = save_seeded_checkpoint(plan.spec, job.seed, run_dir / "weights")
    if plan.numerics == "w8a8":
        if run_dir is None:
            source = weights
            weights = cached_directory("w8a8", [str(source.resolve()), job.seed],
                                       lambda d: prepare_w8a8(plan.spec, source, d, job.seed))
        else:
            weights = prepare_w8a8(plan.spec, weights, run_dir / "w8a8", job.seed)
    return replace(job, weights_dir=str(weights))
