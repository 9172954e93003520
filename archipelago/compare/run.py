"""Run a comparison: the combinations not yet in its store estimated in this process, or on
Dask when asked (a local cluster of processes, or a running scheduler: batch/runner.py), the
records appended to the store as they come back, then every requested combination read back
as a row, a refusal or a misfit.
A record read back is checked by the models that write it (record.py): one that is not as
`archi compare` writes it (edited, damaged, of an older layout) is estimated again and
replaced, and one notice line says so.

The store is a journal (batch/journal.py) whose identity is the model's content digest and
the workload (the formats are in each record's key, not in the store's identity), so a
rerun with more devices, counts, batches or formats estimates only the new combinations,
and an interrupted one resumes: whatever finished is in the file.
"""

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archipelago.batch.journal import Journal
from archipelago.cache_dir import cache_folder
from archipelago.compare.combos import Combo, Task, applicable, combinations, digest, evaluate
from archipelago.compare.rank import pareto_front, ranked
from archipelago.compare.record import BadRecord, checked
from archipelago.compare.request import Request
from archipelago.compare.rows import Refusal, Row, first_reason, group_reasons, row_of
from archipelago.errors import ArchipelagoError, Notice, elide_path
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


def identity(spec: Any, tokens: Generation) -> tuple[dict[str, str], dict[str, str]]:
    """(identity, labels) of a comparison's store: the model by content (its name left out,
    as explore's study identity does) and the prompt and output lengths; one store holds
    every format, each record's key naming its own."""
    model = digest(spec.model_dump(exclude={"name"}))
    workload = f"{tokens.input_tokens}:{tokens.output_tokens}"
    return {"model": model, "tokens": workload}, {"model": spec.name}


def default_store(spec: Any, tokens: Generation) -> Path:
    """`compare/MODEL-IN-OUT-DIGEST.jsonl` in the cache directory (cache_dir.cache_folder),
    that folder made if missing: a store the user did not name is a cache of estimates,
    not a file of theirs to find in the working directory."""
    key, _ = identity(spec, tokens)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name).strip("-.")[:80] or "model"
    folder = cache_folder("compare", "compare's stores", "--store FILE")
    return folder / f"{name}-{tokens.input_tokens}-{tokens.output_tokens}-{digest(key)[:8]}.jsonl"


def _tasks(spec: Any, tokens: str, pending: list[Combo], model: str) -> dict[str, Task]:
    """One task per strategy and device (its counts, batches and formats in turn): few
    enough that scheduling costs little, many enough to keep every worker busy."""
    groups: dict[str, list[Combo]] = {}
    for combo in pending:
        groups.setdefault(f"{combo.strategy} on {combo.device}", []).append(combo)
    return {name: Task(spec, tokens, tuple(combos), model)
            for name, combos in groups.items()}


def compare(request: Request, spec: Any, store: Path, scheduler: str | None = None,
            workers: int | None = None, progress: bool = False) -> Comparison:
    """Estimate what the store lacks, then read every combination of `request` back: in this
    process unless `workers` (>= 1) or `scheduler` asks for Dask."""
    from archipelago.batch.runner import runner

    names, not_applicable = applicable(spec)
    if request.strategies is not None:
        names, not_applicable = list(request.strategies), {}
    combos = combinations(names, request.devices, request.counts, request.batches,
                          request.engine, request.precisions or (None,), request.service)
    key, labels = identity(spec, request.tokens)
    journal = Journal.open(store, KIND, key, labels)
    keys = {combo: combo.key() for combo in combos}
    out = request.tokens.output_tokens
    records = _read_back(journal, keys, out)
    pending = [c for c in combos if keys[c] not in records]
    combo_of = {keys[c]: c for c in pending}
    evaluated: list[str] = []
    tokens = f"{request.tokens.input_tokens}:{request.tokens.output_tokens}"
    tasks = _tasks(spec, tokens, pending, request.model)
    if tasks:
        # records reach the store in one write every quarter second (an fsync each), and
        # whatever is left when the run ends or is stopped
        with runner(workers, scheduler) as run, journal.buffered() as add:

            def done(_: str, result: list[tuple[str, dict[str, Any]]]) -> None:
                for key, value in result:
                    records[key] = _fresh(value, combo_of[key], out)
                    add(key, records[key])
                evaluated.extend(k for k, _ in result)

            label = f"comparing {len(pending)} combinations"
            run(evaluate, tasks, done, label if progress else None)
    return _assemble(request, spec.name, store, [records[keys[c]] for c in combos],
                     not_applicable, evaluated, len(combos) - len(pending))


def _read_back(journal: Journal, keys: dict[Combo, str], output_tokens: int
               ) -> dict[str, dict[str, Any]]:
    """The store's records of these combinations that are as `archi compare` writes them;
    the others are left out, to be estimated again, and one notice line says so."""
    stored = journal.records()
    records, damaged = {}, {}
    for combo, key in keys.items():
        if key in stored:
            try:
                records[key] = checked(stored[key], combo.identity(), output_tokens,
                                       combo.service is not None)
            except BadRecord as err:
                damaged[key] = str(err)
    if damaged:
        first = next(iter(damaged))
        warnings.warn(Notice(
            f"store {elide_path(str(journal.path))}: {len(damaged)} record"
            f"{'s' if len(damaged) > 1 else ''} not as archi compare writes "
            f"{'them' if len(damaged) > 1 else 'it'} (first: '{first}', {damaged[first]}); "
            "estimated again and replaced"), stacklevel=2)
    return records


def _fresh(value: dict[str, Any], combo: Combo, output_tokens: int) -> dict[str, Any]:
    """A record estimated now, checked as a record read back would be: one failing is a
    defect of its kind's estimate, never written to the store."""
    try:
        return checked(value, combo.identity(), output_tokens, combo.service is not None)
    except BadRecord as err:
        raise ArchipelagoError(f"{combo.strategy} on {combo.cluster}: the estimate's record "
                               f"{err}: a bug in the estimate, please report the "
                               "command") from None


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
