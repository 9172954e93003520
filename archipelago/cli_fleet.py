"""`archi compare` and `archi serve`: the commands that size a fleet (every strategy x
device x count, a service at a request rate) rather than one plan. Registered on `archi`'s
app by `register_fleet_commands`, after the single-plan commands, so help lists them last."""

import json
from pathlib import Path
from typing import Annotated

import typer

from archipelago.cli_group import user_errors
from archipelago.cli_options import (
    INFEASIBLE,
    KIND_OPTIONS,
    MAX_SAMPLER_SEED,
    OUTPUT,
    ClusterOpt,
    EngineChoiceOpt,
    JsonOpt,
    ModelArg,
    StrategyOpt,
    console,
    machine_workers,
    within,
    workload_options,
)


def register_fleet_commands(app: typer.Typer) -> None:
    """Add `compare` and `serve` to `app`."""
    @app.command(help="Rank every strategy x device x count x batch for MODEL and a workload: "
                 "latency, tokens/s, upfront cost, energy, the Pareto front; resumable, on Dask.")
    @user_errors
    def compare(
        model: ModelArg,
        tokens: Annotated[str | None, typer.Option(
            help="IN:OUT prompt and generated token counts (with --rate: default the centres "
                 "of --prompt and --output)", show_default=False)] = None,
        devices: Annotated[str | None, typer.Option(
            help="catalog devices, comma-separated (default: those catalog.yaml tags "
                 "compare_default: its HBM FPGAs and four GPUs)", show_default=False)] = None,
        counts: Annotated[str | None, typer.Option(
            help="device counts, comma-separated (default: 1,2,4,8)", show_default=False)] = None,
        strategies: Annotated[str, typer.Option(help="all, or strategies comma-separated")
                              ] = "all",
        batch: Annotated[str, typer.Option(help="concurrent sequences, comma-separated")] = "1",
        latency_target: Annotated[str | None, typer.Option(
            help="mark the rows within it and name the cheapest, e.g. 50ms")] = None,
        sort: Annotated[str | None, typer.Option(
            help="latency, cost, tokens-per-dollar or joules-per-token; with --rate also "
                 "usd-per-million-tokens (default: latency; with --rate "
                 "usd-per-million-tokens)", show_default=False)] = None,
        scheduler: Annotated[str | None, typer.Option(
            help="a running Dask scheduler, tcp://HOST:PORT (default: in this process)")] = None,
        workers: Annotated[int | None, typer.Option(
            callback=machine_workers(),
            help="local Dask worker processes (default, or 0: in this process, no Dask)")
        ] = None,
        store: Annotated[Path | None, typer.Option(
            help="results journal, reused and extended (default: named after the model and "
                 "workload, in compare/ of the cache directory: $ARCHIPELAGO_CACHE_DIR, else "
                 "$XDG_CACHE_HOME/archipelago, else ~/.cache/archipelago)", **OUTPUT)] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="print one JSON object: every row, reason, the front and the power "
                           "model")] = False,
        report_file: Annotated[Path | None, typer.Option(
            "--report", help="write the HTML page (Pareto chart and table) here", **OUTPUT)] = None,
        force: Annotated[bool, typer.Option(help="replace an existing --report file")] = False,
        precision: Annotated[str | None, typer.Option(
            help="number formats, comma-separated, each a row of every strategy: fp16, bf16, "
                 "fp8, w8a8, w4a16, w4a8, -kv8 (docs/number-formats.md; a strategy or device "
                 "that cannot run one is refused for it; default: each strategy's own)",
            show_default=False)] = None,
        engine: Annotated[str, typer.Option(
            help="best (each FPGA row on the best engine of its strategy's design space bounded "
                 "by the board, searched once and read back from the explore store) or published "
                 "(the papers' engines)")] = "best",
        rate: Annotated[str | None, typer.Option(
            help="requests per second: rank services by $ per million tokens, each fitting "
                 "combination with the replicas it needs (docs/compare.md)",
            show_default=False)] = None,
        ttft: Annotated[str | None, typer.Option(
            help="with --rate: time-to-first-token target (default 1s)", show_default=False)
                        ] = None,
        tpot: Annotated[str | None, typer.Option(
            help="with --rate: time-per-output-token target (default 50ms)",
            show_default=False)] = None,
        prompt: Annotated[str | None, typer.Option(
            help="with --rate: prompt tokens, N, lognormal:MEDIAN,SIGMA or uniform:LO,HI "
                 "(default: --tokens' IN, else 512)", show_default=False)] = None,
        output: Annotated[str | None, typer.Option(
            help="with --rate: output tokens, as --prompt (default: --tokens' OUT, else 128)",
            show_default=False)] = None,
        percentile: Annotated[float | None, typer.Option(
            help="with --rate: share of requests (percent) meeting both targets (default 90)",
            show_default=False)] = None,
        requests: Annotated[int | None, typer.Option(
            help="with --rate: requests per simulation (default 300)", show_default=False)
                            ] = None,
        seeds: Annotated[int | None, typer.Option(
            help="with --rate: seeds pooled per capacity point (default 1)",
            show_default=False)] = None,
    ) -> None:
        from archipelago.compare.command import CompareCommand, run_compare
        from archipelago.compare.service import ServiceOptions

        served = ServiceOptions(rate, prompt, output, ttft, tpot, percentile, requests, seeds)
        options = CompareCommand(model, tokens, devices, counts, strategies, batch, latency_target,
                                 sort, scheduler, workers, store, as_json, report_file, force,
                                 precision, engine, served)
        if not run_compare(options, console()):
            raise typer.Exit(INFEASIBLE)


    @app.command(context_settings=KIND_OPTIONS, help="Serve MODEL's plan on CLUSTER to requests "
                 "arriving at a rate: a seeded discrete-event simulation of a scheduler's "
                 "batches over the plan's own iteration times; latency percentiles, throughput, "
                 "goodput and the capacity at the targets.")
    @user_errors
    def serve(
        ctx: typer.Context,
        model: ModelArg,
        cluster: ClusterOpt = None,
        strategy: StrategyOpt = None,
        rate: Annotated[str | None, typer.Option(
            help="requests per second (with --trace: replay it at this rate; default its own)",
            show_default=False)] = None,
        prompt: Annotated[str, typer.Option(
            help="prompt tokens: N, lognormal:MEDIAN,SIGMA or uniform:LO,HI")] = "512",
        output: Annotated[str, typer.Option(
            help="output tokens: N, lognormal:MEDIAN,SIGMA or uniform:LO,HI")] = "128",
        ttft: Annotated[str, typer.Option(help="time-to-first-token target, e.g. 1s")] = "1s",
        tpot: Annotated[str, typer.Option(help="time-per-output-token target, e.g. 50ms")
                        ] = "50ms",
        percentile: Annotated[float, typer.Option(
            help="share of requests (percent) that must meet both targets")] = 90.0,
        arrivals: Annotated[str, typer.Option(help="poisson or fixed (evenly spaced)")
                            ] = "poisson",
        trace: Annotated[Path | None, typer.Option(
            help="CSV or JSONL of arrival_s, prompt_tokens, output_tokens (or the Azure "
                 "traces' TIMESTAMP, ContextTokens, GeneratedTokens)")] = None,
        replicas: Annotated[int, typer.Option(callback=within(1, 1024),
                                              help="copies of the plan behind the router")] = 1,
        router: Annotated[str, typer.Option(help="round-robin or least-outstanding")
                          ] = "round-robin",
        policy: Annotated[str, typer.Option(help="static (run-to-completion batches), "
                                                 "continuous or chunked (prefill)")
                          ] = "continuous",
        max_batch: Annotated[int | None, typer.Option(
            help="requests in a batch (default: 1 static, 64 otherwise)",
            show_default=False)] = None,
        chunk: Annotated[int, typer.Option(help="tokens per iteration under chunked")] = 512,
        micro_batches: Annotated[int | None, typer.Option(
            help="micro-batches in flight through a rack's pipeline stages, under continuous "
                 "or chunked (default: one a stage)", show_default=False)] = None,
        requests: Annotated[int, typer.Option(callback=within(1, 1_000_000),
                                              help="requests simulated per seed")] = 1000,
        seeds: Annotated[int, typer.Option(callback=within(1, 64),
                                           help="seeds per capacity point (pooled)")] = 1,
        seed: Annotated[int, typer.Option(callback=within(0, MAX_SAMPLER_SEED),
                                          help="seed of the arrivals and lengths")] = 0,
        electricity: Annotated[float | None, typer.Option(
            help="electricity price, $/kWh (default 0.10, near the US EIA average)",
            show_default=False)] = None,
        lifetime_years: Annotated[float | None, typer.Option(
            help="years the boards and hosts are amortized over (default 3)",
            show_default=False)] = None,
        utilization: Annotated[float | None, typer.Option(
            help="share of full power drawn on average, 0..1 (default: the simulated busy "
                 "share)", show_default=False)] = None,
        prefill_cluster: Annotated[str | None, typer.Option(
            help="prefill on a pool of this cluster, decode on --cluster's, the KV cache "
                 "moved between them (DistServe, Splitwise)", show_default=False)] = None,
        prefill_strategy: Annotated[str | None, typer.Option(
            help="with --prefill-cluster: the prefill pool's strategy (default: "
                 "--strategy's)", show_default=False)
        ] = None,
        prefill_replicas: Annotated[int | None, typer.Option(
            callback=within(1, 1024),
            help="with --prefill-cluster: copies of the prefill plan (default 1)",
            show_default=False)] = None,
        kv_link: Annotated[str | None, typer.Option(
            help="with --prefill-cluster: the link the KV cache crosses, a catalog link or "
                 "switch (default eth-100g)", show_default=False)] = None,
        as_json: JsonOpt = False,
        report_file: Annotated[Path | None, typer.Option(
            "--report", help="write the HTML page here: latency distributions, throughput "
                             "against latency up to saturation, cost against rate", **OUTPUT)
        ] = None,
        force: Annotated[bool, typer.Option(help="replace an existing --report file")] = False,
        engine_choice: EngineChoiceOpt = None,
    ) -> None:
        from archipelago.serving.command import ServeCommand, print_serve, run_serve

        result = run_serve(ServeCommand(model, cluster, strategy, rate, prompt, output, ttft,
                                        tpot, percentile, arrivals, trace, replicas, router,
                                        policy, max_batch, chunk, requests, seeds, seed, as_json,
                                        workload_options(ctx), electricity, lifetime_years,
                                        utilization, prefill_cluster, prefill_strategy,
                                        prefill_replicas, kv_link, report=report_file,
                                        force=force, micro_batches=micro_batches,
                                        engine=engine_choice))
        if as_json:
            typer.echo(json.dumps(result))
        else:
            print_serve(result, console())
            if report_file is not None:
                console().print(f"report page written to {report_file}")
