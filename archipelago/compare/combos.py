"""The combinations a comparison estimates, and the estimate of each as a journal record.

Which strategies take part is the registry's to say: those whose plan kind declares the
`traits` hook (its estimate is a text generation's GenerationTiming) and whose workload takes
`--tokens`, for the model's kind of spec. Each combination (strategy, device, count, batch)
is the cluster shorthand `COUNTxDEVICE` planned and estimated through `archipelago.api`: the
kind decides the split (a tensor-parallel ring, stages across racks, Megatron on GPUs) and
refuses what it cannot run, in one line kept as the combination's reason. A combination's
number format (`--precision`, a list) is one more dimension: None runs the strategy's own,
and a format the engine or the GPU cannot run is refused like any other combination.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from archipelago import api
from archipelago.compare.record import recorded_floors
from archipelago.compare.service import Service, served
from archipelago.errors import ArchipelagoError
from archipelago.estimate.generation import GenerationTiming
from archipelago.explore.best import BEST_TRIALS, PUBLISHED, best_engine
from archipelago.hardware.catalog import get_device
from archipelago.hardware.cluster import resolve_cluster
from archipelago.strategies.registry import Strategy, get_strategy, strategies

TOKENS = "tokens"  # the workload option a compared kind must take


def digest(content: Any) -> str:
    """A short content digest (sorted-key JSON, sha256), as explore's study identity."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _why_not(strategy: Strategy, spec: Any) -> str | None:
    """Why `strategy` takes no part in comparing `spec`, or None when it does."""
    kind = strategy.plan_kind
    takes = {o.name for o in kind.workload.of("plan", "workload")}
    if kind.traits is None or TOKENS not in takes:
        return f"plan kind '{kind.name}' estimates no text generation"
    if not isinstance(spec, strategy.models):
        return f"it plans no {type(spec).__name__}"
    return None


def applicable(spec: Any) -> tuple[list[str], dict[str, str]]:
    """(strategies compared for `spec`, {strategy not compared: why})."""
    taking, not_taking = [], {}
    for name, strategy in strategies().items():
        why = _why_not(strategy, spec)
        if why is None:
            taking.append(name)
        else:
            not_taking[name] = why
    return taking, not_taking


@dataclass(frozen=True)
class Combo:
    strategy: str
    device: str
    count: int
    batch: int
    engine: str = PUBLISHED  # "best": the best engine of the strategy's space, if it has one
    precision: str | None = None  # a format of number_formats.py; None: the strategy's own
    service: Service | None = None  # `--rate`: what its plan is asked to serve

    @property
    def cluster(self) -> str:
        return f"{self.count}x{self.device}"

    @property
    def searched(self) -> bool:
        """Whether its engine is searched: asked for, and the strategy has a space."""
        return self.engine != PUBLISHED and strategies()[self.strategy].design_space is not None

    def key(self) -> str:
        """The journal key: the combination and the content it was estimated with (the
        device's catalog entry, the links between the boards, the strategy's engine
        defaults; a searched engine's budget), so an edited catalog entry or link is
        estimated afresh rather than read back. A format asked for is named after the
        batch; without one the key is what it was before formats were a dimension. A
        service asked for is named last, by its content's digest."""
        cluster = resolve_cluster(self.cluster)
        links = [cluster.link(0, 1).model_dump()] if cluster.size > 1 else []
        content = {"device": get_device(self.device).model_dump(), "links": links,
                   "engine": strategies()[self.strategy].engine_defaults}
        if self.searched:
            content["search"] = {"trials": BEST_TRIALS}
        fmt = "" if self.precision is None else f" {self.precision}"
        serve = "" if self.service is None else f" serve {digest(self.service.content())[:10]}"
        return (f"{self.strategy} {self.cluster} batch {self.batch}{fmt} "
                f"{digest(content)[:10]}{serve}")

    def identity(self) -> dict[str, Any]:
        """The fields a record of it names (record.IDENTITY); a format only when asked."""
        given = {} if self.precision is None else {"precision": self.precision}
        return {"strategy": self.strategy, "device": self.device, "count": self.count,
                "batch": self.batch, **given}


def combinations(names: list[str], devices: tuple[str, ...], counts: tuple[int, ...],
                 batches: tuple[int, ...], engine: str = PUBLISHED,
                 precisions: tuple[str | None, ...] = (None,), service: Service | None = None
                 ) -> list[Combo]:
    return [Combo(s, d, n, b, engine, p, service) for s in names for d in devices
            for n in counts for b in batches for p in precisions]


@dataclass(frozen=True)
class Task:
    """Combinations one worker estimates in turn (a strategy on a device: its counts,
    batches and formats), with the model's spec resolved once by the caller."""

    spec: Any
    tokens: str
    combos: tuple[Combo, ...]
    model: str = ""  # the name the model was given by: a searched engine's study resolves it


def _engine(model: str, combo: Combo, work: Any) -> tuple[dict[str, Any] | None, str]:
    """The engine parameters a combination runs (None: the strategy's defaults) and their
    label: the best of its space where searched (explore/best.py), else the published. A
    search that finds nothing that fits (or a plan its strategy refuses) leaves the
    published engine, whose record then says why."""
    if not combo.searched:
        return None, PUBLISHED
    try:
        found = best_engine(model, combo.cluster, combo.strategy, work)
    except ArchipelagoError:
        return None, PUBLISHED
    published = get_strategy(combo.strategy).config({}).model_dump()
    return found.engine, found.label(published)


def estimate_combo(spec: Any, tokens: str, combo: Combo, model: str = "") -> dict[str, Any]:
    """The record of one combination: its timing (with the floors of its prefill and decode
    step), split and binding resource, whether it fits (with the kind's reasons), the
    engine it ran, and, asked for a service, what serving it takes (service.py); or the
    one line its strategy refused it with (record.py checks it)."""
    where = f"{combo.strategy} on {combo.cluster}"
    given = {} if combo.precision is None else {"precision": combo.precision}
    try:
        work = api.parse_workload(combo.strategy, {TOKENS: tokens, "batch": str(combo.batch),
                                                   **given})
        engine, label = _engine(model or spec.name, combo, work)
        plan = api.plan_on(spec, resolve_cluster(combo.cluster), combo.strategy, engine, work)
        est, floors = api.estimate_and_floors(combo.strategy, plan, work,
                                              f"{where} ({spec.name})")
    except ArchipelagoError as err:
        return {"status": "refused", "reason": str(err)}
    if not isinstance(est, GenerationTiming):  # a kind's registration mistake
        raise TypeError(f"{where}: the estimate is a {type(est).__name__}, not a "
                        "GenerationTiming, yet its kind declares traits")
    traits = get_strategy(combo.strategy).plan_kind.hook("traits")(plan, work, est)
    reasons = list(getattr(est, "reasons", []))
    record = {"status": "ok" if est.feasible else "infeasible", "reasons": reasons,
              "latency_s": est.latency_s, "tokens_per_s": est.tokens_per_s,
              "prefill_s": est.prefill_s, "decode_s_per_token": est.decode_s_per_token,
              "split": traits.split, "binding": traits.binding, "shares": traits.shares,
              "floors": recorded_floors(floors), "engine": label}
    if combo.service is not None and est.feasible:
        record["serving"] = served(combo.strategy, plan, work, combo.service, est)
    return record


def evaluate(task: Task) -> list[tuple[str, dict[str, Any]]]:
    """A Dask task (module level, so it pickles by name): every combination's record."""
    out = []
    for combo in task.combos:
        value = {**combo.identity(),
                 **estimate_combo(task.spec, task.tokens, combo, task.model)}
        out.append((combo.key(), value))
    return out
