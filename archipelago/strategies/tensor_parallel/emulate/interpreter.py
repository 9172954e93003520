"""Walk a Plan on one rank: the embed steps, the block steps once per layer, the output steps.

Activations live in a dict keyed by op name ('tokens', 'block_in' and 'block_out' are the
boundaries Op.inputs use); each ComputeStep is dispatched by op kind, each CommStep by
collective kind. The same walk serves the prefill (many tokens) and each decode step (one).
"""

import time
from dataclasses import dataclass

import torch

from archipelago.strategies.tensor_parallel.emulate.comm_steps import COMM, NEXT_TOKEN
from archipelago.strategies.tensor_parallel.emulate.compute import COMPUTE
from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.plan import ComputeStep, Plan, Step

# Op kinds whose local output width the plan states exactly (ComputeStep.local_out).
_EXACT_WIDTH = frozenset({"embedding", "norm", "linear", "activation", "gated_activation",
                          "residual"})


def _check_width(step: ComputeStep, out: torch.Tensor) -> None:
    """A shard that disagrees with the plan shows up here, at the step that reads it."""
    if step.stage == "stats":
        assert out.shape[-1] == 2, (step.op.name, tuple(out.shape))
    elif step.op.kind in _EXACT_WIDTH:
        assert out.shape[-1] == step.local_out, (step.op.name, tuple(out.shape), step.local_out)
    elif step.op.kind == "attn_context":
        assert out.shape[-1] == step.local_heads * step.local_out, (step.op.name, out.shape)
    elif step.op.kind == "lm_head":
        assert out.shape[-1] <= step.local_out, (step.op.name, out.shape)


def run_steps(steps: list[Step], env: dict[str, torch.Tensor], rs: RankState) -> None:
    for step in steps:
        if isinstance(step, ComputeStep):
            inputs = [env[name] for name in step.op.inputs]
            if step.stage == "apply":  # the all-reduced statistics of the same op
                inputs.append(env[step.op.name])
            out = COMPUTE[step.op.kind](step, inputs, rs)
            _check_width(step, out)
            env[step.op.name] = out
        else:
            COMM[step.kind](step, env, rs)


def result_name(steps: list[Step]) -> str:
    """A step list's result is the output of its last op (after any collective on it)."""
    return next(s.op.name for s in reversed(steps) if isinstance(s, ComputeStep))


def head_name(plan: Plan) -> str:
    return next(s.op.name for s in plan.output_steps
                if isinstance(s, ComputeStep) and s.op.kind == "lm_head")


def run_layers(plan: Plan, rs: RankState, hidden: torch.Tensor, layers: range) -> torch.Tensor:
    """The block steps over `layers` (absolute indices: weights and the KV cache are keyed
    by them), from the hidden state entering the first; a pipeline stage runs its range.
    Each layer runs its kind's block (dense or MoE), a pass of one token its one-token
    form (latent attention absorbed)."""
    for layer in layers:
        rs.layer = layer
        steps = plan.layer_steps(len(hidden), layer)
        env = {"block_in": hidden}
        run_steps(steps, env, rs)
        hidden = env[result_name(steps)]
    rs.layer = None
    return hidden


def embed(plan: Plan, rs: RankState, tokens: torch.Tensor) -> torch.Tensor:
    """The embed steps: the hidden state entering the first layer (the first stage's)."""
    rs.layer = None
    env = {"tokens": tokens}
    run_steps(plan.embed_steps, env, rs)
    return env[result_name(plan.embed_steps)]


def pick(plan: Plan, rs: RankState, hidden: torch.Tensor) -> tuple[int, torch.Tensor]:
    """The output steps on the last layer's hidden state (the last stage's): the next token
    and this rank's logits slice."""
    env = {"block_out": hidden[-1:]}  # decoders score only the last token
    run_steps(plan.output_steps, env, rs)
    logits = env[head_name(plan)][-1]
    # A head whole on every rank picks the token locally (its reduce-max unit); a split one
    # agreed on it in an argmax_gather.
    token = env[NEXT_TOKEN] if NEXT_TOKEN in env else torch.argmax(logits)
    return int(token), logits


def forward(plan: Plan, rs: RankState, tokens: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Feed `tokens` after the cached ones; the next token and this rank's logits slice."""
    rs.positions = torch.arange(rs.seen, rs.seen + len(tokens))
    hidden = run_layers(plan, rs, embed(plan, rs, tokens), range(plan.spec.layers))
    rs.seen += len(tokens)
    return pick(plan, rs, hidden)


@dataclass
class Generated:
    tokens: list[int]
    logits: torch.Tensor  # (new tokens, this rank's vocab slice), fp32
    seconds: float


@torch.inference_mode()
def generate(plan: Plan, rs: RankState, prompt: torch.Tensor, new_tokens: int) -> Generated:
    """Greedy: the prefill of `prompt` yields the first token, then one decode step each."""
    start = time.perf_counter()
    tokens, logits, feed = [], [], prompt
    for _ in range(new_tokens):
        token, local = forward(plan, rs, feed)
        tokens.append(token)
        logits.append(local.float())
        feed = torch.tensor([token])
    return Generated(tokens, torch.stack(logits), time.perf_counter() - start)
