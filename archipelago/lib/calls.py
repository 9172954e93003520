"""The library's calls, `archipelago.plan()` ... `archipelago.serve()`: typed keyword
arguments in, typed results out (results.py), through the code the commands run. Each call
is its command without the printing: names resolved by the same families, options checked
by the CLI's own declarations (cli_checks.py) and the kinds' parsers (the keyword
arguments a kind takes, `tokens=`, `batch=`, `precision=`, `seq_len=`, arrive as the words
`--tokens 64:64` would), errors the CLI's one-line ArchipelagoError family.

A call does not print, except the progress a kind reports on stderr where its command
does (notices arrive as warnings of the `Notice` category)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from archipelago.lib.choices import word, words
from archipelago.lib.cli_checks import checked
from archipelago.lib.inputs import ClusterInput, ModelInput, named
from archipelago.lib.results import (
    Build,
    Comparison,
    Emulation,
    Estimate,
    Plan,
    Service,
    estimate_of,
    row_of,
)

Engine = str | Path | dict[str, Any] | None


def _engine(engine: Engine, strategy: str) -> tuple[str | None, dict[str, Any]]:
    """(`--engine`'s choice, `--engine-config`'s parameters) of `engine=`: "best" or
    "published", a YAML/JSON file of parameters, or the parameters as a mapping."""
    from archipelago.cli_options import checked_engine, load_engine_config

    if engine is None or (isinstance(engine, str) and not engine.endswith((".yaml", ".yml",
                                                                           ".json"))):
        return engine, {}
    if isinstance(engine, dict):
        return None, checked_engine(dict(engine), strategy, "engine=")
    return None, load_engine_config(Path(engine), strategy)


def plan(model: ModelInput, cluster: ClusterInput = None, strategy: str | None = None, *,
         engine: Engine = None, **options: Any) -> Plan:
    """`archi plan`: `model` split over `cluster` by `strategy` (each left out: the
    command's default), its estimate. `engine`: "published", "best" (searched, read back
    from the explore store), a file or a mapping of the engine's parameters. `options`:
    the plan kind's (tokens=(64, 64) or "64:64", batch=8, precision="w4a16", seq_len=128,
    split="tp=4,pp=2", ...: `archi catalog` lists each kind's)."""
    from archipelago import api
    from archipelago.explore.best import chosen_engine
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.strategies.registry import get_strategy

    with named(model, cluster) as (model_name, cluster_name):
        strategy, cluster_name = api.choose("plan", _text(strategy), cluster_name)
        workload = words(options)
        choice, given = _engine(engine, strategy)
        parameters, chosen = chosen_engine(choice, model_name, cluster_name, strategy,
                                           workload, "plan", given or None)
        result = api.plan_and_estimate(model_name, cluster_name, strategy, workload,
                                       parameters)
        details = get_strategy(strategy).plan_kind.hook("report").summarize(*result).as_json()
        if chosen is not None:
            details["engine"] = chosen.as_json()
        shown = str(cluster.get("name", "<mapping>")) if isinstance(cluster, Mapping) \
            else cluster_name
        estimate = estimate_of(strategy, resolve_cluster(cluster_name), shown,
                               result.estimate, result.workload, details)
    return Plan(estimate, result.plan, result.workload,
                None if chosen is None else chosen.shown())


def estimate(model: ModelInput, cluster: ClusterInput = None, strategy: str | None = None, *,
             engine: Engine = None, **options: Any) -> Estimate:
    """`plan(...)`'s estimate: the figures alone (a sweep's row)."""
    return plan(model, cluster, strategy, engine=engine, **options).estimate


def compare(model: ModelInput, tokens: str | tuple[int, int], *,
            devices: str | list[str] | None = None, counts: str | list[int] | None = None,
            strategies: str | list[str] = "all", batch: int | str | list[int] = 1,
            latency_target: str | float | None = None, sort: str = "latency",
            precision: str | list[str] | None = None, engine: str = "best",
            store: str | Path | None = None, workers: int | None = None,
            scheduler: str | None = None) -> Comparison:
    """`archi compare`: every strategy x device x count x batch (x format) for `model` at
    `tokens` (IN:OUT), ranked by `sort`, with the Pareto front; `latency_target` (seconds,
    or text such as "50ms") marks the rows within it. The store (default: in the cache
    directory) is read back and extended, as the command's."""
    from archipelago.compare.command import CompareCommand, compared

    bounded = checked("compare", {"workers": workers, "store": store})
    given = {"tokens": tokens, "devices": devices, "counts": counts, "strategies": strategies,
             "batch": batch, "latency_target": latency_target, "precision": precision}
    text = words(given)
    with named(model) as (model_name, _):
        data = compared(CompareCommand(
            model_name, text["tokens"], text.get("devices"), text.get("counts"),
            text["strategies"], text["batch"], text.get("latency_target"), sort, scheduler,
            bounded["workers"], bounded["store"], True, None, False,
            text.get("precision"), engine))
    return Comparison(data["model"], data["tokens"], [row_of(r) for r in data["rows"]],
                      [r["line"] for r in data["refused"]],
                      [r["line"] for r in data["infeasible"]], dict(data["not_applicable"]),
                      Path(data["store"]), data)


def emulate(model: ModelInput, cluster: ClusterInput = None, strategy: str | None = None, *,
            seed: int = 0, timeout_s: float = 30.0, **options: Any) -> Emulation:
    """`archi emulate`: the plan run with one process per device and checked against the
    unsplit model (`options`: the kind's, e.g. tokens=(16, 16), precision="fp32")."""
    from archipelago import api

    bounded = checked("emulate", {"seed": seed, "timeout": timeout_s})
    with named(model, cluster) as (model_name, cluster_name):
        strategy, cluster_name = api.choose("emulate", _text(strategy), cluster_name)
        report = api.emulate(model_name, cluster_name, strategy, words(options),
                             bounded["seed"], bounded["timeout"])
    if report is None:  # a torchrun rank other than 0
        raise RuntimeError("emulate() ran on a torchrun rank other than 0")
    return Emulation(str(report.get("model", model_name)), cluster_name, strategy,
                     bool(report["agrees"]), report)


def build(model: ModelInput, out: str | Path, cluster: ClusterInput = None,
          strategy: str | None = None, *, force: bool = False, engine: Engine = None,
          **options: Any) -> Build:
    """`archi build`: the deployment files of the plan, all inside `out` (which must be
    empty unless `force`)."""
    from archipelago import api
    from archipelago.emit.output_dir import check_output_dir

    with named(model, cluster) as (model_name, cluster_name):
        strategy, cluster_name = api.choose("build", _text(strategy), cluster_name)
        check_output_dir(Path(out), force)  # before any planning
        _, given = _engine(engine, strategy)
        summary = api.build(model_name, cluster_name, strategy, str(out), force, given,
                            words(options))
    return Build(Path(summary.get("out", out)), list(summary.get("files", [])), summary)


def serve(model: ModelInput, cluster: ClusterInput = None, strategy: str | None = None, *,
          rate: float | None = None, prompt: int | str = 512, output: int | str = 128,
          ttft: str | float = "1s", tpot: str | float = "50ms", percentile: float = 90.0,
          arrivals: str = "poisson", trace: str | Path | None = None, replicas: int = 1,
          router: str = "round-robin", policy: str = "continuous",
          max_batch: int | None = None, chunk: int = 512, requests: int = 1000,
          seeds: int = 1, seed: int = 0, electricity: float | None = None,
          lifetime_years: float | None = None, utilization: float | None = None,
          engine: str | None = None, micro_batches: int | None = None,
          **options: Any) -> Service:
    """`archi serve`: requests arriving at `rate` per second served by the plan (a
    seeded discrete-event simulation); latency percentiles, throughput, goodput, the
    capacity at the `ttft`/`tpot` targets (seconds, or text such as "50ms") and the cost.
    `prompt`/`output`: a count or "lognormal:MEDIAN,SIGMA" / "uniform:LO,HI"; `engine`:
    "published" (default) or "best", as `plan`'s; `micro_batches`: in flight through a
    rack's pipeline stages (default one a stage)."""
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.serving.command import ServeCommand, run_serve

    b = checked("serve", {"percentile": percentile, "replicas": replicas,
                          "max_batch": max_batch, "chunk": chunk, "requests": requests,
                          "seeds": seeds, "seed": seed, "electricity": electricity,
                          "lifetime_years": lifetime_years, "utilization": utilization,
                          "micro_batches": micro_batches})
    with named(model, cluster) as (model_name, cluster_name):
        data = run_serve(ServeCommand(
            model_name, cluster_name, _text(strategy),
            None if rate is None else word("rate", rate),
            word("prompt", prompt), word("output", output), word("ttft", ttft),
            word("tpot", tpot), b["percentile"], arrivals,
            None if trace is None else Path(trace), b["replicas"], router, policy,
            b["max_batch"], b["chunk"], b["requests"], b["seeds"], b["seed"], True,
            words(options), b["electricity"], b["lifetime_years"], b["utilization"],
            micro_batches=b["micro_batches"], engine=_text(engine)))
        boards = data["replicas"] * resolve_cluster(data["cluster"]).size
    cost = data["cost"]  # capital_usd: every board and host server bought, when priced
    return Service(str(data["model"]), str(data["cluster"]), str(data["strategy"]),
                   float(data["rate"]), dict(data["ttft_s"]), dict(data["tpot_s"]),
                   float(data["throughput_tokens_per_s"]),
                   float(data["goodput_requests_per_s"]), float(data["capacity"]["rate"]),
                   boards, cost.get("capital_usd"), cost.get("usd_per_million_output_tokens"),
                   data)


def _text(choice: Any) -> str | None:
    """An enum or text choice as the registry's name."""
    return None if choice is None else str(choice)
