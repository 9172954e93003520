"""`archi compare --rate R --ttft T --tpot T`: each fitting combination as a service. Its
plan's iteration table (the kind's `serving` hook, tabulated once per plan and shared by
every simulation below) serves seeded requests under continuous batching (serve's default
policy and batch); the capacity of one replica at the targets is serving/metrics.py's
search, below the rate a run of its requests can judge (metrics.judged_limit); the
replicas needed are ceil(R / capacity), confirmed by one simulation at R with that many
replicas behind least-outstanding routing, one more added while it misses (at
most `EXTRA_REPLICAS` times: the capacity is bisected to 1/2**CAPACITY_STEPS of its
bracket, and spreading Poisson arrivals over replicas is not the single replica's load
scaled). The cost per million tokens at that load is computed when the record is read
(rows.py, serving/cost.py), from the catalog as it is then, like the upfront cost."""

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from archipelago.durations import parse_seconds
from archipelago.engines.base import MAX_TOKENS
from archipelago.errors import ArchipelagoError, elide
from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.iteration import IterationTable
from archipelago.estimate.workload import Generation, parse_tokens
from archipelago.serving.command import (
    MAX_SEEDS,
    center_tokens,
    parse_rate,
)
from archipelago.serving.metrics import (
    Targets,
    capacity,
    judged_limit,
    latencies,
    meets,
    percentile_of,
    saturated,
    saturation,
    summary,
)
from archipelago.serving.replica import Policy
from archipelago.serving.requests import MAX_REQUESTS, Lengths, Requests, generate, parse_lengths
from archipelago.serving.simulate import MAX_REPLICAS, Outcome, simulate
from archipelago.strategies.registry import get_strategy

# Serve's defaults: continuous batching of up to 64 requests (archi serve --max-batch).
POLICY, MAX_BATCH, CHUNK = "continuous", 64, 512
REQUESTS, SEEDS = 300, 1  # requests per simulation, seeds pooled per capacity point
# The capacity search brackets within R / 2**SPAN .. R * 2**SPAN: every replica count up to
# MAX_REPLICAS (1024 = 2**10) and a single replica with room to spare; then CAPACITY_STEPS
# bisections place it within 1/64 of its bracket, the confirming simulation doing the rest.
SPAN, CAPACITY_STEPS = 10, 6
EXTRA_REPLICAS = 3
# The search's rates stop below metrics.judged_limit of one replica's service rate (a
# saturated run's steady completion rate): named in the records' key, so records of the
# search without it are not read back.
STABILITY = "judged-limit"
ROUTER = "least-outstanding"
MISSES = "misses targets at any rate"


@dataclass(frozen=True)
class Service:
    """What every combination is asked to serve: the rate, the lengths, the targets, and
    the simulations' size (requests per seed, seeds, the first seed)."""

    rate: float
    prompt: Lengths
    output: Lengths
    targets: Targets
    requests: int = REQUESTS
    seeds: int = SEEDS
    seed: int = 0

    def content(self) -> dict[str, Any]:
        """What a record's key digests: every input of the simulations and the search."""
        return {**asdict(self), "policy": [POLICY, MAX_BATCH], "router": ROUTER,
                "search": [SPAN, CAPACITY_STEPS, EXTRA_REPLICAS, STABILITY]}

    def describe(self) -> dict[str, Any]:
        """The `--json` object's `serving` settings."""
        t = self.targets
        return {"rate": self.rate, "prompt": _text(self.prompt), "output": _text(self.output),
                "ttft_s": t.ttft_s, "tpot_s": t.tpot_s, "percentile": t.percentile,
                "requests": self.requests, "seeds": self.seeds, "seed": self.seed,
                "policy": POLICY, "max_batch": MAX_BATCH, "router": ROUTER,
                "capacity_steps": CAPACITY_STEPS}


def _text(dist: Lengths) -> str:
    if dist.kind == "fixed":
        return f"{dist.a:g}"
    return f"{dist.kind}:{dist.a:g},{dist.b:g}"


@dataclass(frozen=True)
class ServiceOptions:
    """compare's serving options as typed; None: not given."""

    rate: str | None = None
    prompt: str | None = None
    output: str | None = None
    ttft: str | None = None
    tpot: str | None = None
    percentile: float | None = None
    requests: int | None = None
    seeds: int | None = None


def parse_service(o: ServiceOptions, tokens: str | None) -> tuple[str, Service | None]:
    """The `--tokens` the plans are made for and the service, or None without `--rate`.
    Lengths default from `--tokens` (fixed), else serve's 512 and 128, and the plans are
    made for their centres when `--tokens` is not given."""
    if o.rate is None:
        given = [n for n, v in asdict(o).items() if v is not None]
        if given:
            raise ArchipelagoError(f"--{given[0]}: only with --rate (requests per second)")
        if tokens is None:
            raise ArchipelagoError("--tokens: give IN:OUT prompt and generated token counts "
                                   "(or --rate R to compare services)")
        return tokens, None
    given = parse_tokens(tokens or "512:128")
    prompt = parse_lengths("--prompt", o.prompt or str(given.input_tokens), MAX_TOKENS)
    output = parse_lengths("--output", o.output or str(given.output_tokens), MAX_TOKENS)
    percentile = 90.0 if o.percentile is None else o.percentile
    if not 0 < percentile <= 100:
        raise ArchipelagoError(f"--percentile {percentile:g}: must be in (0, 100]")
    requests = REQUESTS if o.requests is None else o.requests
    if not 1 <= requests <= MAX_REQUESTS:
        raise ArchipelagoError(f"--requests {requests}: must be in 1..{MAX_REQUESTS}")
    seeds = SEEDS if o.seeds is None else o.seeds
    if not 1 <= seeds <= MAX_SEEDS:
        raise ArchipelagoError(f"--seeds {seeds}: must be in 1..{MAX_SEEDS}")
    targets = Targets(parse_seconds("--ttft", o.ttft or "1s"),
                      parse_seconds("--tpot", o.tpot or "50ms"), percentile)
    plan_tokens = tokens or f"{center_tokens(prompt)}:{center_tokens(output)}"
    return plan_tokens, Service(parse_rate(o.rate), prompt, output, targets, requests, seeds)


def _per_seed(service: Service, table: IterationTable) -> list[Requests]:
    return [generate("poisson", service.requests, service.prompt, service.output,
                     service.seed + k, table.max_context) for k in range(service.seeds)]


def alone_misses(est: GenerationTiming, workload: Generation, service: Service) -> bool:
    """Whether the plan's own estimate settles that no rate meets the targets, so nothing
    is tabulated or simulated: every request is the estimate's (fixed lengths equal to its
    workload's, batch 1) and even alone misses a target. Alone is each request's best
    case: its TTFT is at least its prefill alone, its TPOT at least the mean of its decode
    steps alone (a step's time grows with the batch beside it, an iteration's with the
    prompts in it), so every request misses, whatever the percentile."""
    p, o = service.prompt, service.output
    if not (p.kind == o.kind == "fixed" and workload.batch == 1
            and (p.a, o.a) == (workload.input_tokens, workload.output_tokens)):
        return False
    t = service.targets
    return est.prefill_s > t.ttft_s or (o.a > 1 and est.decode_s_per_token > t.tpot_s)


def served(strategy: str, plan: Any, workload: Generation, service: Service,
           est: GenerationTiming) -> dict[str, Any]:
    """The record's `serving` object: one replica's capacity at the targets, the replicas
    the rate needs and what the confirming simulation measured; `reason` (and no
    replicas) where the plan cannot serve the rate within the targets."""
    kind = get_strategy(strategy).plan_kind
    if kind.serving is None:
        return _unserved(f"plan kind '{kind.name}' has no serving hook")
    if alone_misses(est, workload, service):
        return _unserved(MISSES)
    try:
        table = kind.hook("serving")(plan, workload, MAX_BATCH)
        per_seed = _per_seed(service, table)
        policy = Policy(POLICY, MAX_BATCH, CHUNK)

        def run(rate: float, replicas: int = 1) -> list[Outcome]:
            return [simulate(table, r, rate, policy, replicas, ROUTER) for r in per_seed]

        floor = service.rate / 2 ** SPAN
        if not meets(run(floor), service.targets):  # one simulation settles the common miss
            return _unserved(MISSES, 1)
        seeds = [saturated(r, MAX_BATCH) for r in per_seed]
        limit = judged_limit(saturation([simulate(table, r, np.inf, policy, 1, ROUTER)
                                         for r in seeds]), service.requests)
        found = capacity(run, service.targets, start=service.rate, steps=CAPACITY_STEPS,
                         doublings=SPAN, limit=limit)
        sims = 2 + found.simulations
        replicas = math.ceil(service.rate / found.rate) if found.bounded else 1
        for _ in range(EXTRA_REPLICAS + 1):
            if replicas > MAX_REPLICAS:
                return _unserved(f"needs over {MAX_REPLICAS} replicas", sims, found.rate)
            outcomes, sims = run(service.rate, replicas), sims + 1
            if meets(outcomes, service.targets):
                break
            replicas += 1
        else:
            return _unserved(f"misses at {replicas - 1} replicas", sims, found.rate)
    except ArchipelagoError as err:  # a request the plan's KV cache cannot hold, ...
        return _unserved(elide(str(err), 120))
    return {"capacity_rps": found.rate, "bounded": found.bounded, "simulations": sims,
            "replicas": replicas, "reason": None,
            **_measured(outcomes, per_seed[0], service.targets), "kv_tokens": int(table.kv_tokens)}


def _unserved(reason: str, simulations: int = 0, rate: float = 0.0) -> dict[str, Any]:
    return {"capacity_rps": rate, "bounded": True, "simulations": simulations,
            "replicas": None, "reason": reason}


def _measured(outcomes: list[Outcome], first: Requests, targets: Targets
              ) -> dict[str, Any]:
    """The confirming simulation's figures the cost and the table need: the targets'
    percentile of TTFT and TPOT pooled over the seeds (as the search judged them), the
    first seed's throughputs and mean busy share (as serve reports them)."""
    pooled = {name: percentile_of(np.concatenate([latencies(o)[name] for o in outcomes]),
                                targets.percentile) for name in ("ttft_s", "tpot_s")}
    got = summary(outcomes[0], targets)
    busy = got["busy_share"]
    return {**pooled, "output_tokens_per_s": got["throughput_tokens_per_s"],
            "prompt_tokens_per_s": float(first.prompt.sum()) / got["span_s"],
            "busy_share": sum(busy) / len(busy)}
