"""Emulate a tensor x pipeline plan (pipeline.py's PipelinePlan): tp x pp rank processes.

The split is the one the estimate costs (the user's, its layer counts balanced when not
given, or the one "auto" chooses). Stage k's ranks, global ranks [k tp, (k + 1) tp), form a
tensor-parallel process group of their own and run the ring plan's steps on the stage's
layers: the first stage also embeds, the last also runs the output ops and picks the token.
Each rank loads only its stage's tensors. Between stages, TP rank r of stage k sends the
block output it holds (the whole hidden vector where the ring plan gathers it, DFX; its
columns where the plan keeps the residual column-split, LORA) to TP rank r of stage k + 1,
which is exactly what that rank's block input is; the last stage's ranks send the picked
token (an int32) back to the first stage's for the next step.
"""

import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from archipelago.emulate.errors import EmulationError
from archipelago.emulate.exchange import Exchange
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.launch import run_spmd
from archipelago.emulate.worker import RankProgram
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import (
    WeightTensor,
    embedding_weights,
    layer_weights,
    output_weights,
)
from archipelago.strategies.tensor_parallel.emulate import (
    DTYPES,
    busiest_links,
    check,
    prompt_ids,
    provide_weights,
    rank_state,
    report_head,
)
from archipelago.strategies.tensor_parallel.emulate.interpreter import (
    embed,
    pick,
    result_name,
    run_layers,
)
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.pipeline import PipelinePlan
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan
from archipelago.strategies.tensor_parallel.stages import Split

# Exchange kinds of the transfers between stages (the hidden state forward, the token back);
# a rank counts what it sends (and its bytes) and what it receives.
HIDDEN_SEND, HIDDEN_RECV = "stage_send", "stage_recv"
TOKEN_SEND, TOKEN_RECV = "token_send", "token_recv"


@dataclass(frozen=True)
class StagePlan:
    """The split an emulation runs: the pipeline plan, the split with every stage's layer
    count, and whether the user gave it or the estimate chose it."""

    pipeline: PipelinePlan
    split: Split
    chosen: str

    @property
    def ring(self) -> Plan:
        """Every stage's program: the ring plan of the split's tensor and expert degrees."""
        return self.pipeline.rings[self.split.tp, self.split.ep]

    @property
    def ranks(self) -> int:
        return self.split.tp * self.split.pp

    def stage_ranks(self, stage: int) -> list[int]:
        tp = self.split.tp
        return list(range(stage * tp, (stage + 1) * tp))

    def layers_of(self, stage: int) -> range:
        counts = self.split.layers or ()
        start = sum(counts[:stage])
        return range(start, start + counts[stage])


def stage_plan(plan: PipelinePlan, job: EmulationJob) -> StagePlan:
    """The split the estimate of `plan` costs for the job's workload."""
    est = plan.estimate(job.workload)
    counts = est.split.layers or ()
    if len(counts) != est.split.pp or min(counts) < 1:
        raise EmulationError(f"--split layers={'+'.join(map(str, counts))}: every one of the "
                             f"{est.split.pp} stages needs at least one layer")
    return StagePlan(plan, est.split, est.chosen)


def stage_weights(spec: ModelSpec, layers: range, first: bool, last: bool
                  ) -> list[WeightTensor]:
    """The tensors a stage holds: its layers' own, the embedding's on the first stage, the
    final norm and LM head on the last (a head tied to the token table reads that table,
    so the last stage holds it too)."""
    head = "embed_tokens.weight" if spec.tied_embeddings else None
    ends = [t for t in embedding_weights(spec) if first or (last and t.role == head)]
    if last:
        ends += list(output_weights(spec))
    return [*ends, *(t for layer in layers for t in layer_weights(spec, layer))]


def block_out_width(plan: Plan) -> int:
    """Columns of the block output one rank holds: the full width of a collective run on
    it last, else its op's local width (a column-split residual)."""
    name = result_name(plan.block_steps)
    for step in reversed(plan.block_steps):
        if isinstance(step, CommStep) and step.tensor == name:
            return step.width
        if isinstance(step, ComputeStep) and step.op.name == name:
            return step.local_out
    raise AssertionError(f"no step makes '{name}'")


@dataclass
class _Place:
    """Where a rank sits: its stage, TP rank, global rank, and the stage's layers."""

    plan: StagePlan
    stage: int
    tp_rank: int

    @property
    def rank(self) -> int:
        return self.stage * self.plan.split.tp + self.tp_rank

    @property
    def first(self) -> bool:
        return self.stage == 0

    @property
    def last(self) -> bool:
        return self.stage == self.plan.split.pp - 1


@torch.inference_mode()
def _generate(place: _Place, rs: RankState, ex: Exchange, job: EmulationJob
              ) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy generation, this rank's part of it: the tokens it knows (all, on the last
    stage; those sent back, on the first) and its logits slices (last stage only)."""
    ring, work, tp = place.plan.ring, job.workload, place.plan.split.tp
    layers = place.plan.layers_of(place.stage)
    width, dtype = block_out_width(ring), DTYPES[job.precision]
    feed = prompt_ids(ring.spec, work.input_tokens, job.seed)
    tokens: list[int] = []
    logits: list[torch.Tensor] = []
    for step in range(work.output_tokens):
        rows = len(feed) if place.first else (work.input_tokens if step == 0 else 1)
        rs.positions = torch.arange(rs.seen, rs.seen + rows)
        what = f"the hidden state of step {step}"
        hidden = (embed(ring, rs, feed) if place.first
                  else ex.recv((rows, width), dtype, place.rank - tp, HIDDEN_RECV, what))
        hidden = run_layers(ring, rs, hidden, layers)
        rs.seen += rows
        if not place.last:
            assert hidden.shape == (rows, width) and hidden.dtype == dtype, hidden.shape
            ex.send(hidden, place.rank + tp, HIDDEN_SEND, what)
        else:
            token, local = pick(ring, rs, hidden)
            tokens.append(token)
            logits.append(local.float())
        if step + 1 == work.output_tokens:
            break
        what = f"the token of step {step}"
        if place.last and not place.first:
            ex.send(torch.tensor([token], dtype=torch.int32), place.tp_rank, TOKEN_SEND, what)
        if place.first and not place.last:
            token = int(ex.recv((1,), torch.int32, place.rank + (place.plan.split.pp - 1) * tp,
                                TOKEN_RECV, what)[0])
            tokens.append(token)
        if place.first:
            feed = torch.tensor([token])
    return tokens, logits


def run_rank(plan: StagePlan, job: EmulationJob, rank: int, exchange: Exchange
             ) -> dict[str, Any]:
    """Join every stage's group (all ranks create all groups, in order), load this stage's
    shard and run its part of the generation."""
    timeout = timedelta(seconds=job.timeout_s)
    groups = [dist.new_group(plan.stage_ranks(k), timeout=timeout)
              for k in range(plan.split.pp)]
    place = _Place(plan, *divmod(rank, plan.split.tp))
    ex = Exchange(exchange.heartbeat, groups[place.stage])
    ring = plan.ring
    tensors = stage_weights(ring.spec, plan.layers_of(place.stage), place.first, place.last)
    rs, held = rank_state(ring, job, ring.devices[place.tp_rank], ex, tensors)
    start = time.perf_counter()
    tokens, logits = _generate(place, rs, ex, job)
    return {"stage": place.stage, "tokens": tokens,
            "logits": torch.stack(logits) if logits else None,
            "vocab_slice": list(rs.vocab_slice), "seconds": time.perf_counter() - start,
            "bytes_by_memory": held, "integer_checksum": rs.integer_checksum,
            "collectives": dict(ex.counts), "link_bytes": dict(ex.link_bytes)}


def summarize(plan: StagePlan, job: EmulationJob, ranks: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """The last stage's tokens and logits against transformers; collectives by stage; the
    bytes each link between stages carried, by TP rank pair."""
    tp, pp = plan.split.tp, plan.split.pp
    stages = [ranks[k * tp:(k + 1) * tp] for k in range(pp)]
    for k, stage in enumerate(stages):
        if any(r["collectives"] != stage[0]["collectives"] for r in stage):
            raise EmulationError(f"stage {k}'s ranks disagree on the collectives run")
    tokens = stages[-1][0]["tokens"]
    returned = tokens if pp == 1 else tokens[:-1]
    if any(r["tokens"] != tokens for r in stages[-1]) or any(
            r["tokens"] != returned for r in stages[0]):
        raise EmulationError("ranks disagree on the generated tokens")
    kinds = dict.fromkeys(kind for r in ranks for kind in r["link_bytes"])  # no receives
    links = [{"from_stage": k, "to_stage": k + 1, "carries": "hidden state",
              "bytes": [r["link_bytes"].get(HIDDEN_SEND, 0) for r in stages[k]]}
             for k in range(pp - 1)]
    if pp > 1:
        links.append({"from_stage": pp - 1, "to_stage": 0, "carries": "token",
                      "bytes": [r["link_bytes"].get(TOKEN_SEND, 0) for r in stages[-1]]})
    seconds = max(r["seconds"] for r in ranks)
    return {
        **report_head(plan.ring, job, ranks, stages[-1]),
        "cluster": plan.pipeline.cluster.name, "ranks": plan.ranks,
        "split": {"tp": tp, "pp": pp, "layers": list(plan.split.layers or ()),
                  "chosen": plan.chosen},
        "collectives": [stage[0]["collectives"] for stage in stages],
        "bytes_per_link": busiest_links(ranks, kinds),
        "stage_links": links,
        "seconds": seconds, "tokens_per_s": job.workload.output_tokens / seconds,
    }


def pace(plan: StagePlan, job: EmulationJob, rank: int) -> tuple[int, int]:
    """Collectives and transfers rank `rank` runs per generated token, and the tokens."""
    ring, place = plan.ring, _Place(plan, *divmod(rank, plan.split.tp))

    def count(steps: list) -> int:
        return sum(isinstance(s, CommStep) for s in steps)

    pp = plan.split.pp
    per_token = (count(ring.embed_steps) * place.first
                 + len(plan.layers_of(place.stage)) * count(ring.block_steps)
                 + count(ring.output_steps) * place.last
                 + (not place.first) + (not place.last) + (pp > 1) * (place.first or place.last))
    return per_token, job.workload.output_tokens


def weights(plan: StagePlan, job: EmulationJob, run_dir: Path | None) -> EmulationJob:
    """The ring plan's weights (every stage reads the same checkpoint, its own tensors)."""
    return provide_weights(plan.ring, job, run_dir)


def role(plan: StagePlan, rank: int) -> str:
    """The part of the pipeline rank `rank` emulates: its stage and tensor shard."""
    stage, shard = divmod(rank, plan.split.tp)
    return (f"pipeline stage {stage + 1} of {plan.split.pp}, tensor shard {shard + 1} of "
            f"{plan.split.tp}")


PROGRAM = RankProgram(run_rank, summarize, pace, weights, role)


def emulate_stages(plan: PipelinePlan, job: EmulationJob) -> dict[str, Any] | None:
    """Check the stages' ring plan as a one-ring emulation would, then tp x pp ranks."""
    stages = stage_plan(plan, job)
    check(stages.ring, job)
    return run_spmd(stages, job, PROGRAM)
