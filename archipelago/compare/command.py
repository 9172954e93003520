"""`archi compare` behind its options: the request checked whole before any work (names,
targets, the scheduler's address), the comparison run, then the table or one JSON object and
the page. The CLI only declares the options."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from archipelago.compare.service import ServiceOptions

# Characters per line of `archi compare` written to a file or pipe (its table is that wide).
COMPARE_WIDTH = 180
SERVING_WIDTH = 80  # --rate's five columns


@dataclass(frozen=True)
class CompareCommand:
    """The options of `archi compare` as typed (text where the request parser reads text)."""

    model: str
    tokens: str | None  # None: only with --rate (the lengths' centres)
    devices: str | None
    counts: str | None
    strategies: str
    batch: str
    latency_target: str | None
    sort: str | None  # None: latency, or $ per million tokens with --rate
    scheduler: str | None
    workers: int | None
    store: Path | None
    as_json: bool
    report_file: Path | None
    force: bool
    precision: str | None = None
    engine: str = "best"
    service: ServiceOptions = field(default_factory=ServiceOptions)  # --rate and its options


def run_compare(options: CompareCommand, console: Console) -> bool:
    """Run the comparison and print it; whether any combination fits."""
    from archipelago.compare.summary import rows_from_dict
    from archipelago.compare.table import print_comparison
    from archipelago.output_file import write_atomically

    summary = compared(options, progress=console.is_terminal)
    if options.as_json:
        print(json.dumps(summary, indent=2))
    else:  # thirteen columns: off a terminal (a file, a pipe) the table keeps its lines
        # whole, unless $COLUMNS says how wide to be
        width = COMPARE_WIDTH + (SERVING_WIDTH if summary.get("serving") else 0)
        wide = console if console.is_terminal or os.environ.get("COLUMNS") else \
            Console(width=width)
        print_comparison(summary, rows_from_dict(summary), wide)
    if options.report_file is not None:
        from archipelago.compare.page import comparison_html

        write_atomically(options.report_file, comparison_html(summary), "--report",
                         options.force)
        if not options.as_json:
            console.print(f"report page written to {options.report_file}")
    return bool(summary["rows"])


def compared(options: CompareCommand, progress: bool = False) -> dict[str, Any]:
    """The request checked whole, then compared: `--json`'s object (the library's
    `archipelago.compare` calls this too)."""
    from archipelago.compare.combos import applicable
    from archipelago.compare.request import DEFAULT_COUNTS, default_devices, parse_request
    from archipelago.compare.run import compare, default_store
    from archipelago.compare.service import parse_service
    from archipelago.compare.summary import comparison_dict
    from archipelago.models.zoo import resolve_model
    from archipelago.output_file import check_output_file
    from archipelago.strategies.registry import strategies as registered

    tokens, service = parse_service(options.service, options.tokens)
    spec = resolve_model(options.model)
    taking, _ = applicable(spec)
    request = parse_request(options.model, tokens, options.devices or default_devices(),
                            options.counts or DEFAULT_COUNTS, options.strategies, options.batch,
                            options.latency_target, options.sort, taking, list(registered()),
                            options.precision, options.engine, service)
    if options.scheduler is not None:
        from archipelago.batch.workers import check_scheduler

        check_scheduler(options.scheduler)
    if options.report_file is not None:
        from archipelago.report.html import check_target

        check_target(options.report_file, options.force, "--report")
    target = options.store or default_store(spec, request.tokens)
    check_output_file(target, "--store", True)  # an existing store is read and extended
    return comparison_dict(compare(request, spec, target, options.scheduler, options.workers,
                                   progress=progress))
