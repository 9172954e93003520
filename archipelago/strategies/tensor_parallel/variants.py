"""Many engine designs of one tensor-parallel plan costed at once: the kind's batch evaluator
for a design search (seeds/002 §V-D evaluates a population of candidate hardware parameters
per generation; issue 22 asks numpy over the population, not one call chain per design).

Each design is given in its design space's encoding (what `space.sample` returns) and
validated as `archi plan` validates it: a refused one keeps the one-line error the plan
would raise and reads as infeasible, infinitely slow and over every limit; so does one
below the kind's physical floors (floors.py), which the pipeline holds every plan to. The
rest are grouped by what an engine cannot vary in one pass (its `varied` parameters aside:
precision, split). A group is planned once (steps, shards and the memory they hold do not
depend on the varied parameters); an engine that offers `variants` (LORA's systolic core,
DFX's) then costs the whole group through the kind's own estimator, every figure with a
leading axis over the designs, and one that does not (an engine registered from outside)
is estimated a design at a time. Either way each figure, and each refusal, is the one
`archi plan` and the utilization hook give that design.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from functools import cache, cached_property
from operator import attrgetter
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, TypeAdapter, ValidationError

from archipelago.errors import ArchipelagoError
from archipelago.estimate.figures import finite_estimate
from archipelago.estimate.floors import check_floors
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster, resolve_cluster
from archipelago.hardware.device import FABRIC
from archipelago.models.spec import ModelSpec
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import Strategy, get_strategy
from archipelago.strategies.tensor_parallel.costs import (
    DeviceUse,
    device_use,
    feasibility,
    generation_seconds,
    positions_reason,
)
from archipelago.strategies.tensor_parallel.efficiency import decode_stream_share
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.floors import (
    Timing,
    design_refusals,
    floors,
    phase_bounds,
)
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planner import in_format
from archipelago.strategies.tensor_parallel.planning.rings import one_ring
from archipelago.strategies.tensor_parallel.utilization import LIMITED, Number, worst_use

SEARCH = "the design search"  # what a plan of stages is refused for (rings.one_ring)


@runtime_checkable
class VariantEngine(Protocol):
    """An engine that costs many designs at once, their config's `varied` parameters
    differing: `variants(configs)` is an engine whose seconds and `unit_counts` (resource
    counts by unit) have a leading axis over `configs`."""

    def variants(self, configs: Sequence[Any]) -> Any: ...

    def unit_counts(self, spec: ModelSpec) -> dict[str, dict[str, Number]]: ...


@dataclass(frozen=True)
class VariantEstimates:
    """One entry per design, in the order given: the latency and tokens/s `archi plan`
    estimates, whether it fits (memory and every fabric resource), the worst device's
    fraction of each fabric resource and of HBM capacity, the share of HBM bandwidth decode
    streams at (as `archi plan` reports it), and the error
    the plan raised for a refused design (None for the others)."""

    latency_s: np.ndarray
    tokens_per_s: np.ndarray
    feasible: np.ndarray
    dsp: np.ndarray
    bram: np.ndarray
    uram: np.ndarray
    aie: np.ndarray
    hbm: np.ndarray
    hbm_bandwidth: np.ndarray
    errors: tuple[str | None, ...]

    def utilization(self, index: int) -> dict[str, float]:
        """Design `index`'s figures as the kind's utilization hook gives them."""
        return {limit: column[index] for limit, column in self._columns.items()}

    def utilizations(self) -> list[dict[str, float]]:
        """Every design's `utilization`, in order, made at once (a search's batch)."""
        names = tuple(self._columns)
        return [dict(zip(names, used, strict=True))
                for used in zip(*self._columns.values(), strict=True)]

    @cached_property
    def _columns(self) -> dict[str, list[float]]:
        """Each limit's figures as Python floats, made once (numpy is slow on numbers)."""
        return {limit: getattr(self, limit).tolist()
                for limit in (*LIMITED, "hbm", "hbm_bandwidth")}


class _Table:
    """The figures being filled in, every design refused until costed."""

    def __init__(self, count: int) -> None:
        self.columns = {"latency_s": np.full(count, np.inf), "tokens_per_s": np.zeros(count),
                        "feasible": np.zeros(count, dtype=bool)}
        self.columns.update({name: np.full(count, np.inf)
                             for name in (*FABRIC, "hbm", "hbm_bandwidth")})
        self.errors: list[str | None] = [None] * count

    def fill(self, rows: list[int], figures: dict[str, Number],
             refused: Sequence[str | None] = ()) -> None:
        """`figures` (numbers, or arrays over `rows`) into `rows`, but for each row that
        `refused` gives an error: that error, its figures left as a refused design's."""
        kept = np.array([why is None for why in refused] or [True] * len(rows))
        for row, why in zip(rows, refused, strict=False):
            self.errors[row] = why
        for name, value in figures.items():
            self.columns[name][np.asarray(rows)[kept]] = np.broadcast_to(
                np.ravel(value), (len(rows),))[kept]

    def result(self) -> VariantEstimates:
        return VariantEstimates(**self.columns, errors=tuple(self.errors))


def evaluate_variants(model: str, cluster: str, strategy: str, workload: Generation,
                      engines: Sequence[dict[str, Any]]) -> VariantEstimates:
    """The hook `batch_evaluator`: each of `engines` (engine parameters in the strategy's
    design-space encoding) as `archi plan --strategy strategy` would cost it at
    `workload`, with the utilization hook's figures."""
    chosen = get_strategy(strategy)
    spec, ring = resolve_model(model), resolve_cluster(cluster)
    where = f"{strategy} plan of {model} on {cluster}"
    table = _Table(len(engines))
    groups: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}
    for row, given in enumerate(_configs(chosen, engines)):
        try:
            if isinstance(given, ArchipelagoError):
                raise given
            config = in_format(given, workload)  # --precision, if given
        except ArchipelagoError as err:
            table.errors[row] = str(err)
            continue
        groups.setdefault(_shared(config), []).append((row, config))
    for shared, members in groups.items():
        rows = [row for row, _ in members]
        try:
            if _varied(members[0][1]):
                planned = _planned(chosen, spec, ring, workload, engines[rows[0]], shared)
                figures, timing = _together(planned, workload, [c for _, c in members],
                                            where)
                table.fill(rows, figures, design_refusals(planned.bounds, timing, len(rows),
                                                          where))
            else:
                _one_by_one(table, chosen, spec, ring, workload,
                            [(row, engines[row]) for row in rows], where)
        except ArchipelagoError as err:
            for row in rows:
                table.errors[row] = str(err)
    return table.result()


def _configs(chosen: Strategy, engines: Sequence[dict[str, Any]]
             ) -> list[BaseModel | ArchipelagoError]:
    """Each engine's config as `chosen.config` validates it, or the one-line error it
    raises, the whole batch validated at once: in one list validation, then (where some
    are refused) the others again at once and each refused one by `chosen.config` itself,
    so its error is the plan's."""
    defaults = chosen.engine_defaults
    many = _many(chosen.engine_config)
    try:
        return many.validate_python([{**defaults, **engine} for engine in engines])
    except ValidationError as err:
        refused = {problem["loc"][0] for problem in err.errors()}
    kept = iter(many.validate_python([{**defaults, **engine} for row, engine
                                      in enumerate(engines) if row not in refused]))
    return [next(kept) if row not in refused else _alone(chosen, engine)
            for row, engine in enumerate(engines)]


@cache
def _many(config_type: type[BaseModel]) -> TypeAdapter[list[Any]]:
    """A validator of lists of `config_type`, made once a type (making one is slow)."""
    return TypeAdapter(list[config_type])


def _alone(chosen: Strategy, engine: dict[str, Any]) -> BaseModel | ArchipelagoError:
    try:
        return chosen.config(engine)
    except ArchipelagoError as err:
        return err


def _varied(config: Any) -> tuple[str, ...]:
    """The parameters the config's engine costs many values of at once (`varied`, a class
    attribute of its config), none for most."""
    return getattr(config, "varied", ())


def _shared(config: Any) -> tuple[Any, ...]:
    """What designs costed together must have in common: every parameter their engine
    does not vary."""
    return _fixed(type(config), _varied(config))(config)


@cache
def _fixed(config_type: type, varied: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """What reads the parameters of a config type but those `varied`, as a tuple."""
    names = [name for name in config_type.model_fields if name not in varied]
    if len(names) == 1:  # attrgetter of one name gives the value, not a tuple
        return lambda config: (getattr(config, names[0]),)
    return attrgetter(*names)


@dataclass(frozen=True)
class _Planned:
    """What the designs of a group share, planned once for every batch of a search (each
    asks for the same groups): the staged plan and its one ring, the memory its boards hold
    (whatever the varied parameters), whether that fits and every phase's floor; the
    strategy, model and cluster it was planned for, held so their ids stay theirs."""

    chosen: Strategy
    spec: ModelSpec
    ring: Cluster
    plan: Plan
    held: list[DeviceUse]
    fits: bool
    bounds: list[tuple[str, tuple[float, str]]]


_PLANNED: dict[tuple[Any, ...], _Planned] = {}
PLANNED_KEPT = 16  # groups planned and kept; a process that plans more starts over


def _planned(chosen: Strategy, spec: ModelSpec, ring: Cluster, workload: Generation,
             engine: dict[str, Any], shared: tuple[Any, ...]) -> _Planned:
    """The group's `_Planned`, from the designs `shared` parameters (`engine`: one of its
    designs, as given)."""
    key = (id(chosen), id(spec), id(ring), workload, shared)
    found = _PLANNED.get(key)
    if found is not None and found.chosen is chosen and found.spec is spec \
            and found.ring is ring:
        return found
    staged = chosen.plan(spec, ring, engine, workload)
    plan = one_ring(staged, SEARCH)
    assert isinstance(plan.engine, VariantEngine), type(plan.engine)
    # The memory a design holds does not depend on its varied parameters: the first
    # design's shows the group's, checked without any engine's resources.
    held = device_use(plan, workload)
    fits = not (positions_reason(plan, workload)
                + feasibility(plan, [replace(use, units={}) for use in held]))
    found = _Planned(chosen, spec, ring, plan, held, fits, phase_bounds(staged, workload))
    if len(_PLANNED) >= PLANNED_KEPT:
        _PLANNED.clear()
    _PLANNED[key] = found  # a Dask worker's threads may clear it meanwhile: return ours
    return found


def _together(planned: _Planned, workload: Generation, configs: list[Any], where: str
              ) -> tuple[dict[str, Number], Timing]:
    """The figures of `configs` (one group) from one pass of the estimator over them, and
    their timing, every one finite and non-negative or the pipeline's error. Only `plan`'s
    inputs are suspected: every design's parameters passed the config's bounds, the same
    that refuse non-finite and negative values for a single plan, and the cluster is the
    same."""
    plan = planned.plan
    many = replace(plan, engine=plan.engine.variants(configs))
    figures = finite_estimate(lambda _, work: _figures(many, work, planned.held,
                                                       planned.fits), plan, workload, where)
    timing = Timing(**{f.name: figures.pop(f.name) for f in fields(Timing)})
    return figures, timing


def _figures(many: Plan, workload: Generation, held: list[Any], fits: bool
             ) -> dict[str, Number]:
    """Latency and tokens/s as the estimator (estimate.py) sums them, fit as `feasibility` and
    the utilization hook judge it, and the `Timing` figures, for every design of `many`'s
    engine."""
    pre, dec = generation_seconds(many, workload)
    prefill = sum(pre.values())
    latency = prefill + np.sum(sum(dec.values()), axis=-1)
    counts = many.engine.unit_counts(many.spec)
    total = {res: sum(unit.get(res, 0) for unit in counts.values()) for res in FABRIC}
    feasible: Number = fits
    for dp in many.devices:  # as feasibility's `exceeding`
        for res in FABRIC:
            feasible = feasible & (total[res] <= getattr(many.fabric(dp.rank), res))
    used = worst_use(many, [(total, use.hbm_bytes) for use in held], FABRIC)
    steps = sum(dec.values())
    decoding = workload.output_tokens > 1
    per_token = np.mean(steps, axis=-1) if decoding else 0.0
    return {"latency_s": latency, "tokens_per_s": workload.batch * workload.output_tokens
            / latency, "feasible": feasible, **used,
            "hbm_bandwidth": decode_stream_share(many, workload, per_token),
            "prefill_s": prefill, "decode_s_per_token": per_token,
            "decode_s_first": steps[..., 0] if decoding else 0.0,
            "decode_s_last": steps[..., -1] if decoding else 0.0}


def _one_by_one(table: _Table, chosen: Strategy, spec: ModelSpec, ring: Cluster,
                workload: Generation, designs: list[tuple[int, dict[str, Any]]],
                where: str) -> None:
    """Designs of an engine that varies nothing at once, each through the estimator."""
    for row, engine in designs:
        staged = chosen.plan(spec, ring, engine, workload)
        plan = one_ring(staged, SEARCH)
        est = finite_estimate(estimate, staged, workload, where)
        check_floors(floors(staged, workload, est), where)
        uses = [(use.total.model_dump(), use.hbm_bytes) for use in est.devices]
        table.fill([row], {"latency_s": est.latency_s, "tokens_per_s": est.tokens_per_s,
                           "feasible": est.feasible, **worst_use(plan, uses, FABRIC),
                           "hbm_bandwidth": decode_stream_share(plan, workload,
                                                                est.decode_s_per_token)})
