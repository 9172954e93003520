"""Emulate a staged plan: one process per board of every stage (a ring is one stage).

Stage k's ranks, global ranks [k tp, (k + 1) tp), form a tensor-parallel process group of
their own (a single stage uses the world's) and run the ring program's steps on the
stage's layers: the first stage also embeds, the last also runs the output ops and picks
the token. Each rank loads only its stage's tensors. Between stages, TP rank r of stage k
sends the block output it holds (the whole hidden vector where the ring program gathers
it, DFX; its columns where the program keeps the residual column-split, LORA) to TP rank r
of stage k + 1, which is exactly what that rank's block input is; the last stage's ranks
send the picked token (an int32) back to the first stage's for the next step.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from archipelago.emulate.errors import EmulationError
from archipelago.emulate.exchange import Exchange
from archipelago.emulate.job import EmulationJob
from archipelago.emulate.worker import RankProgram
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import (
    WeightTensor,
    embedding_weights,
    layer_weights,
    output_weights,
)
from archipelago.strategies.tensor_parallel.emulate.interpreter import (
    embed,
    pick,
    result_name,
    run_layers,
)
from archipelago.strategies.tensor_parallel.emulate.quant_shard import row_maxima
from archipelago.strategies.tensor_parallel.emulate.rank import (
    DTYPES,
    Reference,
    busiest_links,
    prepare_reference,
    prompt_ids,
    provide_weights,
    rank_state,
    report_head,
)
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan

# Exchange kinds of the transfers between stages (the hidden state forward, the token back);
# a rank counts what it sends (and its bytes) and what it receives.
HIDDEN_SEND, HIDDEN_RECV = "stage_send", "stage_recv"
TOKEN_SEND, TOKEN_RECV = "token_send", "token_recv"


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
    """Where a rank sits: its stage, TP rank and global rank."""

    plan: StagedPlan
    stage: Stage
    tp_rank: int

    @property
    def rank(self) -> int:
        return self.stage.nodes[self.tp_rank]

    @classmethod
    def of(cls, plan: StagedPlan, rank: int) -> "_Place":
        index, tp_rank = divmod(rank, plan.split.tp)
        return cls(plan, plan.stages[index], tp_rank)


@torch.inference_mode()
def _generate(place: _Place, rs: RankState, ex: Exchange, job: EmulationJob
              ) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy generation, this rank's part of it: the tokens it knows (all, on the last
    stage; those sent back, on the first) and its logits slices (last stage only)."""
    stage, work, tp = place.stage, job.workload, place.plan.split.tp
    ring, pp = stage.program, len(place.plan.stages)
    width, dtype = block_out_width(ring), DTYPES[job.precision]
    feed = prompt_ids(ring.spec, work.input_tokens, job.seed)
    tokens: list[int] = []
    logits: list[torch.Tensor] = []
    for step in range(work.output_tokens):
        rows = len(feed) if stage.first else (work.input_tokens if step == 0 else 1)
        rs.positions = torch.arange(rs.seen, rs.seen + rows)
        what = f"the hidden state of step {step}"
        hidden = (embed(ring, rs, feed) if stage.first
                  else ex.recv((rows, width), dtype, place.rank - tp, HIDDEN_RECV, what))
        hidden = run_layers(ring, rs, hidden, stage.layers)
        rs.seen += rows
        if not stage.last:
            assert hidden.shape == (rows, width) and hidden.dtype == dtype, hidden.shape
            ex.send(hidden, place.rank + tp, HIDDEN_SEND, what)
        else:
            token, local = pick(ring, rs, hidden)
            tokens.append(token)
            ex.heartbeat.token(step, token)  # the launcher's check may start on them
            logits.append(local.float())
        if step == 0:
            ex.heartbeat.stamp("first_token")
        if step + 1 == work.output_tokens:
            break
        what = f"the token of step {step}"
        if stage.last and not stage.first:
            ex.send(torch.tensor([token], dtype=torch.int32), place.tp_rank, TOKEN_SEND, what)
        if stage.first and not stage.last:
            token = int(ex.recv((1,), torch.int32, place.rank + (pp - 1) * tp, TOKEN_RECV,
                                what)[0])
            tokens.append(token)
            ex.heartbeat.token(step, token)
        if stage.first:
            feed = torch.tensor([token])
    return tokens, logits


def run_rank(plan: StagedPlan, job: EmulationJob, rank: int, exchange: Exchange
             ) -> dict[str, Any]:
    """Join every stage's group (all ranks create all groups, in order; one stage is the
    world), load this stage's shard and run its part of the generation."""
    place = _Place.of(plan, rank)
    ex = exchange
    if len(plan.stages) > 1:
        ex = exchange.split([list(s.nodes) for s in plan.stages])
    stage, ring = place.stage, place.stage.program
    tensors = stage_weights(ring.spec, stage.layers, stage.first, stage.last)
    rs, held = rank_state(ring, job, ring.devices[place.tp_rank], ex, tensors)
    ex.heartbeat.stamp("loaded")
    start = time.perf_counter()
    tokens, logits = _generate(place, rs, ex, job)
    ex.heartbeat.stamp("last_token")
    return {"stage": stage.index, "tokens": tokens,
            "logits": torch.stack(logits) if logits else None,
            "vocab_slice": list(rs.vocab_slice), "seconds": time.perf_counter() - start,
            "bytes_by_memory": held, "integer_checksum": rs.integer_checksum,
            "collectives": dict(ex.counts), "link_bytes": dict(ex.link_bytes)}


def _stage_links(ranks: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The bytes each link between stages carried, by TP rank pair."""
    pp = len(ranks)
    links = [{"from_stage": k, "to_stage": k + 1, "carries": "hidden state",
              "bytes": [r["link_bytes"].get(HIDDEN_SEND, 0) for r in ranks[k]]}
             for k in range(pp - 1)]
    if pp > 1:
        links.append({"from_stage": pp - 1, "to_stage": 0, "carries": "token",
                      "bytes": [r["link_bytes"].get(TOKEN_SEND, 0) for r in ranks[-1]]})
    return links


def summarize(plan: StagedPlan, job: EmulationJob, ranks: list[dict[str, Any]],
              ref: Reference) -> dict[str, Any]:
    """The last stage's tokens and logits against transformers (`ref`, from `reference`);
    the collectives each
    stage's ranks ran; where the plan shows its split, it and the bytes each link between
    stages carried."""
    tp, pp = plan.split.tp, len(plan.stages)
    stages = [ranks[k * tp:(k + 1) * tp] for k in range(pp)]
    for k, stage in enumerate(stages):
        if any(r["collectives"] != stage[0]["collectives"] for r in stage):
            raise EmulationError(f"stage {k}'s ranks disagree on the collectives run"
                                 if pp > 1 else "ranks disagree on the collectives run")
    tokens = stages[-1][0]["tokens"]
    returned = tokens if pp == 1 else tokens[:-1]
    if any(r["tokens"] != tokens for r in stages[-1]) or any(
            r["tokens"] != returned for r in stages[0]):
        raise EmulationError("ranks disagree on the generated tokens")
    kinds = dict.fromkeys(kind for r in ranks for kind in (*r["collectives"], *r["link_bytes"])
                          if kind not in (HIDDEN_RECV, TOKEN_RECV))  # links carry sends
    seconds = max(r["seconds"] for r in ranks)
    split = ({"split": {"tp": tp, "pp": pp, "layers": list(plan.split.layers or ()),
                        "chosen": plan.chosen},
              "collectives": [stage[0]["collectives"] for stage in stages]}
             if plan.shows_split else {"collectives": stages[0][0]["collectives"]})
    return {
        **report_head(plan.program, job, ranks, stages[-1], ref),
        "cluster": plan.cluster.name, "ranks": plan.ranks, **split,
        "bytes_per_link": busiest_links(ranks, kinds),
        **({"stage_links": _stage_links(stages)} if plan.shows_split else {}),
        "seconds": seconds, "tokens_per_s": job.workload.output_tokens / seconds,
    }


def pace(plan: StagedPlan, job: EmulationJob, rank: int) -> tuple[int, int]:
    """Collectives and transfers rank `rank` runs per generated token, and the tokens."""
    place = _Place.of(plan, rank)
    stage = place.stage
    ring, pp = stage.program, len(plan.stages)

    def count(steps: list) -> int:
        return sum(isinstance(s, CommStep) for s in steps)

    first, last = stage.first, stage.last
    per_token = (count(ring.embed_steps) * first
                 + sum(count(ring.layer_steps(1, layer)) for layer in stage.layers)
                 + count(ring.output_steps) * last
                 + (not first) + (not last) + (pp > 1) * (first or last)
                 + row_maxima(ring.spec, ring.devices[place.tp_rank], stage.layers,
                              job.precision))
    return per_token, job.workload.output_tokens


def weights(plan: StagedPlan, job: EmulationJob, run_dir: Path | None) -> EmulationJob:
    """The ring program's weights (every stage reads the same checkpoint, its own tensors)."""
    return provide_weights(plan.program, job, run_dir)


def reference(plan: StagedPlan, job: EmulationJob, idle: Callable[[], bool],
              tokens: Callable[[], tuple[list[int], bool]]) -> Reference:
    """The unsplit model the last stage's results are checked against."""
    return prepare_reference(plan.program, job, idle, tokens)


def role(plan: StagedPlan, rank: int) -> str:
    """What rank `rank` emulates: its cluster node, its stage, the shard it holds."""
    place = _Place.of(plan, rank)
    node = plan.cluster.nodes[place.rank]
    stage = (f"pipeline stage {place.stage.index + 1} of {len(plan.stages)}, "
             if len(plan.stages) > 1 else "")
    return (f"{node.device.key} '{node.name}', {stage}tensor shard {place.tp_rank + 1} of "
            f"{plan.split.tp}")


PROGRAM = RankProgram(run_rank, summarize, pace, weights, role, reference)
