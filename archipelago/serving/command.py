"""`archi serve` behind its options: the request checked whole before any work, the plan
made and estimated through the pipeline, its kind's `serving` hook tabulating its iteration
times, the requests served, the capacity searched, then a table or one JSON object. Names
no strategy or kind: any strategy whose kind has the hook serves."""

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from archipelago.durations import parse_seconds
from archipelago.engines.base import MAX_TOKENS
from archipelago.errors import ArchipelagoError
from archipelago.estimate.iteration import IterationTable
from archipelago.estimate.workload import MAX_BATCH
from archipelago.serving.cost import (
    DEFAULT_ELECTRICITY,
    DEFAULT_LIFETIME_YEARS,
    bill,
    check_pricing,
    cost,
)
from archipelago.serving.disaggregated import decode_policy
from archipelago.serving.metrics import (
    Targets,
    capacity,
    judged_limit,
    saturated,
    saturation,
    summary,
)
from archipelago.serving.pipeline import PipelineReplica, replica_kind
from archipelago.serving.pools import PrefillPool, check_pool_options, kv_link, pool_rows
from archipelago.serving.replica import Policy
from archipelago.serving.requests import (
    Lengths,
    Requests,
    check_arrivals,
    fitted,
    generate,
    parse_lengths,
)
from archipelago.serving.simulate import check_settings, simulate
from archipelago.strategies.options import SET_BY_COMMAND

MAX_RATE = 1e6  # requests per second: past any deployment's front door
MAX_SEEDS = 64  # seeds per capacity point; more is a typo, not more confidence


@dataclass(frozen=True)
class ServeCommand:
    """The options of `archi serve` as typed."""

    model: str
    cluster: str | None
    strategy: str | None
    rate: str | None
    prompt: str
    output: str
    ttft: str
    tpot: str
    percentile: float
    arrivals: str
    trace: Path | None
    replicas: int
    router: str
    policy: str
    max_batch: int | None
    chunk: int
    requests: int
    seeds: int
    seed: int
    as_json: bool
    kind_options: dict[str, str]
    electricity: float | None = None  # $/kWh; None: DEFAULT_ELECTRICITY
    lifetime_years: float | None = None  # None: DEFAULT_LIFETIME_YEARS
    utilization: float | None = None  # None: the simulation's mean busy share
    prefill_cluster: str | None = None  # set: prefill on a pool of its own (pools.py)
    prefill_strategy: str | None = None
    prefill_replicas: int | None = None  # None: 1
    kv_link: str | None = None  # None: pools.DEFAULT_KV_LINK
    report: Path | None = None  # --report: the HTML page's file
    force: bool = False  # replace an existing --report file
    micro_batches: int | None = None  # in flight through a staged plan; None: one a stage
    engine: str | None = None  # --engine: published (default) or best, as `archi plan`'s


def parse_rate(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]{1,9}(?:\.[0-9]{0,9})?)\s*", text)
    if not m or not 0 < float(m.group(1)) <= MAX_RATE:
        raise ArchipelagoError(f"--rate '{text[:40]}': give requests per second, a number "
                               f"in (0, {MAX_RATE:g}]")
    return float(m.group(1))


def center_tokens(dist: Lengths) -> int:
    """The count a plan is made for: the fixed one, the median, the middle."""
    return round(dist.a if dist.kind != "uniform" else (dist.a + dist.b) / 2)


def _checked(options: ServeCommand) -> tuple[Lengths, Lengths, Targets, Policy]:
    if not 0 < options.percentile <= 100:
        raise ArchipelagoError(f"--percentile {options.percentile:g}: must be in (0, 100]")
    if not 1 <= options.seeds <= MAX_SEEDS:
        raise ArchipelagoError(f"--seeds {options.seeds}: must be in 1..{MAX_SEEDS}")
    if not 1 <= options.chunk <= MAX_TOKENS:
        raise ArchipelagoError(f"--chunk {options.chunk}: must be in 1..{MAX_TOKENS} tokens")
    for name, flags in SET_BY_COMMAND["serve"].items():
        if name in options.kind_options:
            raise ArchipelagoError(f"--{name}: `archi serve` sets it from {flags}")
    batch = options.max_batch or (1 if options.policy == "static" else 64)
    if not 1 <= batch <= MAX_BATCH:
        raise ArchipelagoError(f"--max-batch {batch}: must be in 1..{MAX_BATCH}")
    policy = Policy(options.policy, batch, options.chunk, options.micro_batches)
    check_settings(policy, options.replicas, options.router)
    check_arrivals(options.arrivals)
    check_pricing(*_pricing(options), options.utilization)
    check_pool_options(options.prefill_cluster, options.prefill_strategy,
                       options.prefill_replicas, options.kv_link)
    if options.report is not None:
        from archipelago.report.html import check_target

        if options.prefill_cluster is not None:
            raise ArchipelagoError("--report: the page draws one pool's service; not with "
                                   "--prefill-cluster")
        check_target(options.report, options.force, "--report")
    targets = Targets(parse_seconds("--ttft", options.ttft),
                      parse_seconds("--tpot", options.tpot), options.percentile)
    return (parse_lengths("--prompt", options.prompt, MAX_TOKENS),
            parse_lengths("--output", options.output, MAX_TOKENS), targets, policy)


def _table(options: ServeCommand, prompt: Lengths, output: Lengths, max_batch: int
           ) -> tuple[str, str, IterationTable, dict[str, Any] | None]:
    """The strategy and cluster chosen, the plan's iteration table and the engine it ran
    (`--engine`'s JSON, None for a strategy with one engine)."""
    from archipelago import api
    from archipelago.explore.best import chosen_engine
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = api.choose("serve", options.strategy, options.cluster)
    kind = get_strategy(strategy).plan_kind
    hook = kind.hook("serving")  # a kind without one is refused here, naming those with
    given = {**options.kind_options, "tokens": f"{center_tokens(prompt)}:{center_tokens(output)}"}
    workload = api.parse_workload(strategy, given, "serve")
    engine, chosen = chosen_engine(options.engine, options.model, cluster, strategy, given,
                                   "serve", None)
    plan = api.make_plan(options.model, cluster, strategy, engine, given, "serve")
    return (strategy, cluster, hook(plan, workload, max_batch),
            None if chosen is None else chosen.as_json())


def _rate(options: ServeCommand) -> tuple[float, Requests | None]:
    """The rate to serve at, and the trace's requests (their lengths not yet fitted to
    the model): `--rate`, else the trace's own rate."""
    trace = own = None
    if options.trace is not None:
        from archipelago.serving.trace import read_trace

        trace, own = read_trace(options.trace)
    if options.rate is not None:
        return parse_rate(options.rate), trace
    if own is None:
        raise ArchipelagoError("--rate: give requests per second (or a --trace to replay)")
    return own, trace


def run_serve(options: ServeCommand) -> dict[str, Any]:
    """The simulation's summary and capacity, as the JSON object `--json` prints."""
    prompt, output, targets, policy = _checked(options)
    rate, trace = _rate(options)
    strategy, cluster, table, engine = _table(options, prompt, output, policy.max_batch)
    pool = _prefill_pool(options, strategy, prompt, output, policy.max_batch)
    if trace is not None:
        per_seed = [fitted(trace.unit_arrivals, trace.prompt, trace.output, table.max_context)]
    else:
        per_seed = [generate(options.arrivals, options.requests, prompt, output,
                             options.seed + k, table.max_context)
                    for k in range(options.seeds)]

    def run(at: float, seeds: list[Requests] = per_seed) -> list:
        if pool is not None:
            return [pool.serve(table, r, at, policy, options.replicas, options.router)
                    for r in seeds]
        return [simulate(table, r, at, policy, options.replicas, options.router)
                for r in seeds]

    outcome = run(rate)[0]
    result = summary(outcome, targets)
    slots = options.replicas * policy.max_batch
    service_rate = saturation(run(float("inf"), [saturated(r, slots) for r in per_seed]))
    limit = judged_limit(service_rate, len(per_seed[0]))
    found = capacity(run, targets, start=rate, limit=limit)
    prompt_per_s = float(per_seed[0].prompt.sum()) / result["span_s"]
    served = {
        "model": options.model, "cluster": cluster, "strategy": strategy, "engine": engine,
        "policy": policy.name, "max_batch": policy.max_batch,
        "chunk": policy.chunk if policy.budget else None,
        **_pipeline(table, policy if pool is None else decode_policy(policy)),
        "replicas": options.replicas, "router": options.router, "rate": rate,
        "arrivals": "trace" if options.trace else options.arrivals,
        "prompt": options.prompt, "output": options.output, "seed": options.seed,
        "clipped": per_seed[0].clipped, "kv_cache_tokens": table.kv_tokens,
        "targets": {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s,
                    "percentile": targets.percentile},
        **result,
        "throughput_prompt_tokens_per_s": prompt_per_s,
        "cost": _cost(options, _pools(options, cluster, pool, result["busy_share"]), result,
                      prompt_per_s),
        "capacity": {"rate": found.rate, "bounded": found.bounded,
                     "service_rate": service_rate, "judged_limit": limit,
                     "simulations": found.simulations + 1, "seeds": len(per_seed),
                     "requests": len(per_seed[0])},
        **({} if pool is None else pool.report(outcome, result["span_s"], cluster, strategy,
                                               options.replicas)),
    }
    if options.report is not None:
        from archipelago.serving.page import write_page
        from archipelago.serving.sweep import Service

        write_page(options.report, options.force, served, outcome, Service(
            table, per_seed[0], policy, options.router, targets,
            service_rate / options.replicas),
            lambda n, res, prompt_s: _cost(options, [(cluster, n, res["busy_share"])], res,
                                           prompt_s))
    return served


def _prefill_pool(options: ServeCommand, strategy: str, prompt: Lengths, output: Lengths,
                  max_batch: int) -> PrefillPool | None:
    """The prefill pool of `--prefill-cluster` (by `--prefill-strategy`, else the decode
    pool's `strategy`; its kind options the strategy's own), or None where the one pool
    both prefills and decodes."""
    if options.prefill_cluster is None:
        return None
    from archipelago.models.zoo import resolve_model

    name, link = kv_link(options.kv_link)
    given = replace(options, cluster=options.prefill_cluster,
                    strategy=options.prefill_strategy or strategy, kind_options={})
    try:
        strategy, cluster, table, _ = _table(given, prompt, output, max_batch)
    except ArchipelagoError as error:
        raise ArchipelagoError(f"--prefill-cluster {options.prefill_cluster[:40]}: "
                               f"{error}") from None
    return PrefillPool(strategy, cluster, table, options.prefill_replicas or 1, name, link,
                       resolve_model(options.model))


def _pools(options: ServeCommand, cluster: str, pool: PrefillPool | None, busy: list[float]
           ) -> list[tuple[str, int, list[float]]]:
    """Each pool's cluster, replicas and their busy shares (the prefill pool's first)."""
    if pool is None:
        return [(cluster, options.replicas, busy)]
    return [(pool.cluster, pool.replicas, busy[:pool.replicas]),
            (cluster, options.replicas, busy[pool.replicas:])]


def _pipeline(table: IterationTable, policy: Policy) -> dict[str, Any]:
    """The plan's pipeline stages and the micro-batches in flight through them (one: the
    stages in turn)."""
    stages = max(1, len(table.stages))
    pipelined = stages > 1 and replica_kind(table, policy) is PipelineReplica
    return {"stages": stages,
            "micro_batches": (policy.micro_batches or stages) if pipelined else 1}


def _pricing(options: ServeCommand) -> tuple[float, float]:
    """$/kWh and lifetime in years, the defaults where not given."""
    return (DEFAULT_ELECTRICITY if options.electricity is None else options.electricity,
            DEFAULT_LIFETIME_YEARS if options.lifetime_years is None else options.lifetime_years)


def _cost(options: ServeCommand, pools: list[tuple[str, int, list[float]]],
          result: dict[str, Any], prompt_per_s: float) -> dict[str, Any]:
    """The deployment's cost at the simulated throughput, every pool's boards and hosts
    (billed per pool) together, the utilization each pool's mean busy share weighted by its
    full power; `reason` says why there is no figure (a device without a price, power or
    host server in the catalog)."""
    from archipelago.hardware.cluster import resolve_cluster

    items, reason, full_w, drawn_w = [], None, 0.0, 0.0
    for name, replicas, busy in pools:
        bought, reason = bill([n.device for n in resolve_cluster(name).nodes] * replicas)
        if reason is not None:
            items = []
            break
        power_w = sum(i.count * i.power_w for i in bought)
        items += bought
        full_w += power_w
        drawn_w += power_w * sum(busy) / max(1, len(busy))
    utilization = (options.utilization if options.utilization is not None
                   else drawn_w / full_w if full_w else 0.0)
    electricity, lifetime_years = _pricing(options)
    inputs = {"electricity_usd_per_kwh": electricity, "lifetime_years": lifetime_years,
              "items": [{"name": i.name, "count": i.count, "price_usd": i.price_usd,
                         "power_w": i.power_w} for i in items], "reason": reason}
    if reason is not None:
        return inputs
    out = result["throughput_tokens_per_s"]
    return {**inputs, **cost(items, out, out + prompt_per_s, utilization, electricity,
                             lifetime_years)}


def _ms(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds * 1e3:,.1f} ms"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _cost_row(rates: Any, c: dict[str, Any]) -> None:
    if c["reason"] is not None:
        rates.add_row("cost per million tokens", f"- ({c['reason']})")
        return
    bought = " + ".join(f"{i['count']} x {i['name']}" for i in c["items"])
    rates.add_row(f"capital ({bought}, {c['lifetime_years']:g} years)",
                  f"${c['capital_usd']:,.0f} · ${c['capital_usd_per_h']:,.3f}/h")
    rates.add_row(f"energy ({c['full_power_w']:,.0f} W x {100 * c['utilization']:.1f}% "
                  f"at ${c['electricity_usd_per_kwh']:g}/kWh)",
                  f"${c['energy_usd_per_h']:,.3f}/h")
    rates.add_row("cost per million tokens", f"{_usd(c['usd_per_million_output_tokens'])} "
                  f"output · {_usd(c['usd_per_million_tokens'])} prompt + output")


def _staged(result: dict[str, Any]) -> str:
    if result["stages"] == 1:
        return ""
    return f" · {result['stages']} stages, {result['micro_batches']} micro-batches in flight"


def print_serve(result: dict[str, Any], console: Any) -> None:
    """The summary as rich tables: latencies by percentile, then rates and capacity."""
    from rich.table import Table

    from archipelago.table_fit import fitted

    engine = f" · {result['engine']['engine']} engine" if result.get("engine") else ""
    title = (f"{result['model']} · {result['strategy']} on {result['cluster']} x"
             f"{result['replicas']}{engine} · {result['policy']} (max batch {result['max_batch']})"
             f"{_staged(result)} · {result['rate']:g} req/s")
    lat = Table(title=title)
    for column in ("", "P50", "P90", "P99", "mean"):
        lat.add_column(column, justify="right" if column else "left")
    for key, label in (("ttft_s", "time to first token"), ("tpot_s", "time per output token"),
                       ("e2e_s", "end to end"), ("queue_s", "queueing delay")):
        row = result[key]
        lat.add_row(label, *(_ms(row[k]) for k in ("p50", "p90", "p99", "mean")))
    console.print(fitted(lat, console))
    cap, tg = result["capacity"], result["targets"]
    busy = result["busy_share"]
    rates = Table(show_header=False)
    rates.add_column("figure")
    rates.add_column("value", justify="right")
    rates.add_row("throughput", f"{result['throughput_requests_per_s']:,.3f} req/s · "
                  f"{result['throughput_tokens_per_s']:,.1f} output tokens/s")
    rates.add_row(f"goodput (TTFT ≤ {_ms(tg['ttft_s'])}, TPOT ≤ {_ms(tg['tpot_s'])})",
                  f"{result['goodput_requests_per_s']:,.3f} req/s "
                  f"({100 * result['met_share']:.1f}% of requests)")
    rates.add_row("busy share", f"{100 * sum(busy) / len(busy):.1f}% mean, "
                  f"{100 * max(busy):.1f}% busiest replica")
    if "pools" in result:
        pool_rows(rates, result)
    rates.add_row(f"capacity (P{tg['percentile']:g} within both targets)",
                  f"{'' if cap['bounded'] else '≥ '}{cap['rate']:,.3f} req/s "
                  f"({cap['simulations']} simulations x {cap['seeds']} seeds x "
                  f"{cap['requests']} requests)")
    _cost_row(rates, result["cost"])
    if result["clipped"]:
        rates.add_row("clipped to the model's positions", f"{result['clipped']} requests")
    console.print(fitted(rates, console))
