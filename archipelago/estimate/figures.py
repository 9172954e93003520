"""Every figure of an estimate is a finite, non-negative number, or the estimate is an error.

A negative width or bandwidth in an engine config, or an infinite link latency or clock,
makes the cycle models divide by zero or return negative or infinite times; printed, such a
plan looked feasible, or `--json` held a bare NaN that no JSON reader accepts. The pipeline
(`archipelago.api`) runs every kind's estimator through `finite_estimate`, which leaves its
formulas alone: a plan whose engine parameters or cluster figures are negative or
non-finite is refused naming them; arithmetic that fails names the parameters that are
zero, negative or non-finite; and a figure that still comes out negative, infinite or NaN
is reported as the bug it is, with the plan's inputs.
"""

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields, is_dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel

from archipelago.errors import ArchipelagoError

Result = TypeVar("Result")
# Marks a dataclass field holding inputs an estimate carries along for its readers (a
# stage's plan), not figures it computed: `field(metadata={INPUTS: True})`, left out of
# the walk (the plan's engine and cluster figures are checked as inputs, `suspect_inputs`).
INPUTS = "inputs"


class ImpossibleFigure(ArchipelagoError):
    """An estimate came out negative, infinite or NaN."""


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def numbers(value: Any, path: str = "", properties: bool = True,
            seen: dict[int, Any] | None = None) -> Iterator[tuple[str, float]]:
    """Every number inside `value` (dataclasses, with their properties unless told not to,
    pydantic models, mappings, sequences, numpy arrays), each with the path reaching it.

    An object met again in one walk (a cluster's nodes share one catalog device and repeat
    one DRAM bank) is walked once: it holds the same numbers. `seen` keeps every visited
    object alive, so a property's fresh object cannot reuse a visited one's id."""
    if isinstance(value, bool | str) or value is None:
        return
    if isinstance(value, int | float | np.integer | np.floating):
        yield path, float(value)
        return
    seen = {} if seen is None else seen
    if id(value) in seen:
        return
    seen[id(value)] = value
    if isinstance(value, np.ndarray):
        for index, item in enumerate(value.ravel()):
            yield f"{path}[{index}]", float(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, _join(path, str(key)), properties, seen)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from numbers(item, f"{path}[{index}]", properties, seen)
    elif isinstance(value, BaseModel):
        for name in _model_names(type(value)):
            yield from numbers(getattr(value, name), _join(path, name), properties, seen)
    elif is_dataclass(value):
        for name in _dataclass_names(_fields_owner(value), type(value), properties):
            yield from numbers(getattr(value, name), _join(path, name), properties, seen)


def _fields_owner(value: Any) -> Any:
    """Whose dataclass fields `value` has: its class, or itself if it is a class."""
    return value if isinstance(value, type) else type(value)


# Keyed by classes, whose fields and properties are fixed once defined; a few dozen exist.
@lru_cache(maxsize=256)
def _dataclass_names(owner: Any, cls: type, properties: bool) -> tuple[str, ...]:
    """The fields of dataclass `owner` (but its INPUTS), then (with `properties`) the
    properties of `cls`."""
    names = [f.name for f in fields(owner) if not f.metadata.get(INPUTS)]
    if properties:
        names += [n for n, a in vars(cls).items() if isinstance(a, property)]
    return tuple(names)


# Keyed by model classes likewise.
@lru_cache(maxsize=256)
def _model_names(cls: type[BaseModel]) -> tuple[str, ...]:
    return tuple(cls.model_fields)


def _impossible(number: float) -> bool:
    return not math.isfinite(number) or number < 0


def _possible(value: Any, properties: bool, seen: dict[int, Any]) -> bool:
    """Whether no number `numbers` finds in `value` is impossible: the same walk in the same
    order (stopping at the first impossible one, so the same properties run), without the
    paths, plain numbers judged in place and an array in one numpy pass. Only a failed check
    pays for the paths."""
    if isinstance(value, (bool, str)) or value is None:
        return True
    if isinstance(value, (int, float, np.integer, np.floating)):
        return not _impossible(float(value))
    if id(value) in seen:
        return True
    seen[id(value)] = value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            return bool(np.all(np.isfinite(value) & (value >= 0)))
        return not any(_impossible(float(item)) for item in value.ravel())
    read = _reader(type(value), properties)
    if read is not None:
        items = read(value)
    elif isinstance(value, type) and is_dataclass(value):  # a dataclass itself, not one's
        items = (getattr(value, name)
                 for name in _dataclass_names(value, type(value), properties))
    else:
        return True
    for item in items:
        kind = type(item)
        if kind is float or kind is int:
            number = float(item)
            if number < 0 or not math.isfinite(number):  # _impossible, inlined
                return False
        elif not (kind is str or kind is bool or item is None or id(item) in seen) \
                and not _possible(item, properties, seen):
            return False
    return True


# Keyed by classes, whose kind (mapping, sequence, model, dataclass) and fields are fixed.
@lru_cache(maxsize=256)
def _reader(cls: type, properties: bool) -> Callable[[Any], Iterable[Any]] | None:
    """What `numbers` walks inside an instance of `cls`, as a function of the instance, in
    its order; None for anything it does not walk into."""
    if issubclass(cls, dict):
        return dict.values
    if issubclass(cls, (list, tuple)):
        return iter
    if issubclass(cls, BaseModel):
        fields_of = _model_names(cls)  # plain attributes: read all at once
        return attrgetter(*fields_of) if len(fields_of) > 1 else \
            (lambda value: [getattr(value, name) for name in fields_of])
    if is_dataclass(cls):
        names = _dataclass_names(cls, cls, properties)  # properties run lazily, in order
        return lambda value: (getattr(value, name) for name in names)
    return None


def _first_impossible(value: Any, properties: bool = True) -> tuple[str, float] | None:
    """The path and value of the first impossible number in `value`, if any."""
    if _possible(value, properties, {}):
        return None
    return next(((p, n) for p, n in numbers(value, properties=properties) if _impossible(n)),
                None)


def suspect_inputs(plan: Any, zero: bool = False) -> list[str]:
    """The plan's engine parameters and cluster figures that are negative or non-finite
    (engine parameters that are zero too, with `zero`: a divisor's usual suspects). A plan
    without an engine or a cluster has none of that side to suspect."""
    config = getattr(getattr(plan, "engine", None), "config", None)
    cluster = getattr(plan, "cluster", None)
    if not zero and _possible((config, cluster), False, {}):
        return []
    found = [f"engine parameter {path} = {number:g}"
             for path, number in numbers(config, properties=False)
             if _impossible(number) or (zero and number == 0)]
    found += [f"cluster {cluster.name} {path} = {number:g}"
              for path, number in numbers(cluster, properties=False) if _impossible(number)]
    return found


def finite_estimate(estimate: Callable[[Any, Any], Result], plan: Any, workload: Any,
                    where: str) -> Result:
    """`estimate(plan, workload)` when every figure it returns is finite and non-negative;
    `where` names the plan in the error (the pipeline runs every estimator through here)."""
    impossible = suspect_inputs(plan)
    if impossible:
        raise ImpossibleFigure(f"{where}: {', '.join(impossible)}: must be a finite, "
                               "non-negative number")
    try:
        with np.errstate(all="ignore"):  # judged below, not printed as warnings
            result = estimate(plan, workload)
            bad = _first_impossible(result)
    except (ArithmeticError, ValueError) as err:
        causes = suspect_inputs(plan, zero=True)
        if not causes:
            raise
        raise ImpossibleFigure(f"{where}: {type(err).__name__} ({err}); caused by "
                               f"{', '.join(causes)}") from None
    if bad is not None:
        raise ImpossibleFigure(f"{where}: {bad[0]} is {bad[1]:g}, from no impossible input: "
                               "a bug in the estimate, please report the command")
    return result


def finite_report(report: Result, where: str) -> Result:
    """`report` (an emulation's) when every number in it is finite: the inputs that could
    make one NaN are refused at the edge, so one that is not is a bug, said as such rather
    than printed as a bare NaN that no JSON reader accepts."""
    bad = next(((p, n) for p, n in numbers(report) if not math.isfinite(n)), None)
    if bad is not None:
        raise ImpossibleFigure(f"{where}: {bad[0]} is {bad[1]:g}: a bug in the emulation, "
                               "please report the command")
    return report
