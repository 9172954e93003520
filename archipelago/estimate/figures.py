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
from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel

from archipelago.errors import ArchipelagoError

Result = TypeVar("Result")


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
        for name in type(value).model_fields:
            yield from numbers(getattr(value, name), _join(path, name), properties, seen)
    elif is_dataclass(value):
        names = [f.name for f in fields(value)]
        if properties:
            names += [n for n, a in vars(type(value)).items() if isinstance(a, property)]
        for name in names:
            yield from numbers(getattr(value, name), _join(path, name), properties, seen)


def _impossible(number: float) -> bool:
    return not math.isfinite(number) or number < 0


def suspect_inputs(plan: Any, zero: bool = False) -> list[str]:
    """The plan's engine parameters and cluster figures that are negative or non-finite
    (engine parameters that are zero too, with `zero`: a divisor's usual suspects). A plan
    without an engine or a cluster has none of that side to suspect."""
    config = getattr(getattr(plan, "engine", None), "config", None)
    cluster = getattr(plan, "cluster", None)
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
            bad = next(((p, n) for p, n in numbers(result) if _impossible(n)), None)
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
