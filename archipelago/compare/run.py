"""Run a comparison: the combinations not yet in its store estimated on Dask (a local cluster
of processes, or a running scheduler), each worker's records appended to the store as they
come back, then every requested combination read back as a row, a refusal or a misfit.

The store is a journal (batch/journal.py) whose identity is the model's content digest and
the workload, so a rerun with more devices, counts or batches estimates only the new
combinations, and an interrupted one resumes: whatever finished is in the file.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archipelago.batch.journal import Journal
from archipelago.compare.combos import Combo, Task, applicable, combinations, digest, evaluate
from archipelago.compare.rank import pareto_front, ranked
from archipelago.compare.request import Request
from archipelago.compare.rows import Refusal, Row, first_reason, group_reasons, row_of
from archipelago.estimate.workload import Generation

KIND = "compare"  # the journal's kind: a store of comparison records


@dataclass
class Comparison:
    """What `archi compare` reports: the fitting rows ranked, the Pareto front, why the
    other combinations are absent, and what this run estimated."""

    request: Request
    model: str  # the model's own name
    store: Path
    rows: list[Row]
    front: list[Row]
    refused: list[Refusal]
    infeasible: list[Refusal]
    not_applicable: dict[str, str]
    evaluated: list[str] = field(default_factory=list)  # journal keys estimated this run
    reused: int = 0  # combinations read back from the store


def identity(spec: Any, tokens: Generation, precision: str | None = None
             ) -> tuple[dict[str, str], dict[str, str]]:
    """(identity, labels) of a comparison's store: the model by content (its name left out,
    as explore's study identity does), the prompt and output lengths, and the precision
    when one was asked for."""
    model = digest(spec.model_dump(exclude={"name"}))
    workload = f"{tokens.input_tokens}:{tokens.output_tokens}"
    given = {} if precision is None else {"precision": precision}
    return {"model": model, "tokens": workload, **given}, {"model": spec.name}


def default_store(spec: Any, tokens: Generation, precision: str | None = None) -> Path:
    """`compare-MODEL-IN-OUT-DIGEST.jsonl` in the working directory."""
    key, _ = identity(spec, tokens, precision)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name).strip("-.")[:80] or "model"
    return Path(f"compare-{name}-{tokens.input_tokens}-{tokens.output_tokens}-"
                f"{digest(key)[:8]}.jsonl")


def _tasks(spec: Any, tokens: str, pending: list[Combo], precision: str | None
           ) -> dict[str, Task]:
    """One task per strategy and device (its counts and batches in turn): few enough that
    scheduling costs little, many enough to keep every worker busy."""
    groups: dict[str, list[Combo]] = {}
    for combo in pending:
        groups.setdefault(f"{combo.strategy} on {combo.device}", []).append(combo)
    return {name: Task(spec, tokens, tuple(combos), precision)
            for name, combos in groups.items()}


def compare(request: Request, spec: Any, store: Path, scheduler: str | None = None,
            workers: int | None = None, progress: bool = False) -> Comparison:
    """Estimate what the store lacks, then read every combination of `request` back."""
    from archipelago.batch.workers import dask_client, stream

    names, not_applicable = applicable(spec)
    if request.strategies is not None:
        names, not_applicable = list(request.strategies), {}
    combos = combinations(names, request.devices, request.counts, request.batches)
    key, labels = identity(spec, request.tokens, request.precision)
    journal = Journal.open(store, KIND, key, labels)
    records = journal.records()
    keys = {combo: combo.key() for combo in combos}
    pending = [c for c in combos if keys[c] not in records]
    evaluated: list[str] = []
    tokens = f"{request.tokens.input_tokens}:{request.tokens.output_tokens}"
    tasks = _tasks(spec, tokens, pending, request.precision)
    if tasks:
        # records reach the store in one write every quarter second (an fsync each), and
        # whatever is left when the run ends or is stopped
        with dask_client(scheduler, workers) as client, journal.buffered() as add:

            def done(_: str, result: list[tuple[str, dict[str, Any]]]) -> None:
                for key, value in result:
                    add(key, value)
                records.update(result)
                evaluated.extend(k for k, _ in result)

            stream(client, evaluate, tasks, done,
                   f"comparing {len(pending)} combinations" if progress else None)
    return _assemble(request, spec.name, store, [records[keys[c]] for c in combos],
                     not_applicable, evaluated, len(combos) - len(pending))


def _assemble(request: Request, model: str, store: Path, records: list[dict[str, Any]],
              not_applicable: dict[str, str], evaluated: list[str], reused: int
              ) -> Comparison:
    out = request.tokens.output_tokens
    rows = [row_of(r, out) for r in records if r["status"] == "ok"]
    refused = group_reasons([(r, r["reason"]) for r in records if r["status"] == "refused"])
    misfits = group_reasons([(r, first_reason(r)) for r in records
                             if r["status"] == "infeasible"])
    return Comparison(request, model, store, ranked(rows, request.sort), pareto_front(rows),
                      refused, misfits, not_applicable, evaluated, reused)
