"""A combination's record in a comparison's store, as these models write it and as they
check it whenever it is read back. A store is the user's file: an editor, another program
or a damaged disk may have changed it. So a record is held to the bounds a fresh estimate
meets (every figure finite, timings positive, none below the physical floors the estimate
was checked against, which the record keeps beside them), to the combination its key
names, and to what its own figures imply: the latency is the prefill plus the decode
steps, the throughput is the batch's tokens over the latency, the binding resource is the
largest share, and a record fits exactly when it has no reasons. A record failing any of
these is estimated again (run.py)."""

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from archipelago.errors import ArchipelagoError, elide
from archipelago.estimate.floors import PhaseFloor, below
from archipelago.estimate.generation import Traits
from archipelago.estimate.generation_floors import FIGURES

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
Text = Annotated[str, Field(min_length=1)]
Floored = Literal["prefill_s", "decode_s_per_token"]  # the timings a record keeps floors of
# How far a record's figures may stray from what they imply: the estimators sum the same
# terms in another order (the latency as prefill plus each step, the mean step as their
# mean), a few ulps; an edited figure is off by far more.
AGREE = 1e-9
IDENTITY = ("strategy", "device", "count", "batch", "precision")


class BadRecord(ArchipelagoError):
    """A store's record is not what `archi compare` writes for its combination."""


class _Combination(BaseModel):
    """The combination a record is of; the validation context's `combination` (its
    strategy, device, count, batch and the format asked for, if one was: Combo.identity)
    must be it. A record without `precision` ran its strategy's own format."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    strategy: Text
    device: Text
    count: Count
    batch: Count
    precision: Text | None = None

    @model_validator(mode="after")
    def _of_its_key(self, info: ValidationInfo) -> "_Combination":
        want = info.context["combination"]
        for name in IDENTITY:
            if getattr(self, name) != want.get(name):
                raise ValueError(f"field '{name}' is {getattr(self, name)!r}, its key says "
                                 f"{want.get(name)!r}")
        return self


class Refused(_Combination):
    status: Literal["refused"]
    reason: Text


class Served(BaseModel):
    """What serving a fitting plan at the rate takes (compare/service.py): replicas and the
    confirming simulation's figures, or the reason it cannot (and no replicas)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    capacity_rps: NonNegative
    bounded: bool
    simulations: Annotated[int, Field(ge=0)]
    replicas: Count | None
    reason: Text | None
    ttft_s: NonNegative | None = None
    tpot_s: NonNegative | None = None
    output_tokens_per_s: Positive | None = None
    prompt_tokens_per_s: Positive | None = None
    busy_share: NonNegative | None = None
    kv_tokens: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _served_or_why(self) -> "Served":
        figures = (self.ttft_s, self.tpot_s, self.output_tokens_per_s,
                   self.prompt_tokens_per_s, self.busy_share, self.kv_tokens)
        if (self.replicas is None) != (self.reason is not None):
            raise ValueError("replicas and a reason are exclusive, one of them required")
        if (self.replicas is None) != all(f is None for f in figures):
            raise ValueError("a served record has every figure, an unserved one none")
        return self


class Estimated(_Combination):
    """A combination planned and estimated: it fits (`ok`) or not (`infeasible`, with
    the kind's reasons)."""

    status: Literal["ok", "infeasible"]
    reasons: list[Text]
    latency_s: Positive
    tokens_per_s: Positive
    prefill_s: Positive
    decode_s_per_token: NonNegative
    split: Text
    binding: Text
    shares: dict[str, NonNegative]
    floors: dict[Floored, NonNegative]
    engine: Text = "published"  # the engine it ran: published, or a searched one's label
    serving: Served | None = None  # `--rate`: every fitting record has it, no other

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "Estimated":
        out = info.context["output_tokens"]
        if (self.status == "ok") == bool(self.reasons):
            raise ValueError(f"status '{self.status}' with {len(self.reasons)} reasons")
        if (self.serving is not None) != (self.status == "ok" and info.context["served"]):
            raise ValueError("serving figures where none were asked for, or none where "
                             "they were")
        if self.binding != Traits(self.split, self.shares).binding:
            raise ValueError(f"binding '{self.binding}' is not the largest of its shares")
        want = {"prefill_s"} | ({"decode_s_per_token"} if out > 1 else set())
        if set(self.floors) != want:
            raise ValueError(f"floors of {sorted(self.floors)}, not of {sorted(want)}")
        for figure, floor in self.floors.items():
            if below(getattr(self, figure), floor):
                raise ValueError(f"{figure} {getattr(self, figure):.4g} is below its "
                                 f"physical floor {floor:.4g}")
        steps = self.prefill_s + (out - 1) * self.decode_s_per_token
        if not math.isclose(self.latency_s, steps, rel_tol=AGREE):
            raise ValueError(f"latency_s {self.latency_s:.6g} is not prefill_s plus "
                             f"{out - 1} decode steps ({steps:.6g})")
        rate = self.batch * out / self.latency_s
        if not math.isclose(self.tokens_per_s, rate, rel_tol=AGREE):
            raise ValueError(f"tokens_per_s {self.tokens_per_s:.6g} is not batch x "
                             f"{out} tokens over latency_s ({rate:.6g})")
        return self


_RECORD = TypeAdapter(Annotated[Estimated | Refused, Field(discriminator="status")])


def checked(value: Any, combination: dict[str, Any], output_tokens: int,
            served: bool = False) -> dict[str, Any]:
    """`value` as the record of `combination` (Combo.identity) for
    `output_tokens` per sequence, as these models write it (with serving figures when
    `served`: a `--rate` run); BadRecord naming the first field at fault otherwise."""
    try:
        record = _RECORD.validate_python(value, context={"combination": combination,
                                                          "output_tokens": output_tokens,
                                                          "served": served})
    except ValidationError as err:
        first = err.errors()[0]
        loc = [str(p) for p in first["loc"]]
        field = ".".join(loc[1:] if loc and loc[0] in ("ok", "infeasible", "refused")
                         else loc)
        at = f"field '{elide(field, 40)}': " if field else ""
        got = "" if not field or first["type"] == "missing" else (
            f" (got {elide(repr(first['input']), 40)})")
        raise BadRecord(f"{at}{first['msg'].removeprefix('Value error, ')}{got}") from None
    unasked = {n for n in ("precision", "serving") if getattr(record, n, None) is None}
    return record.model_dump(exclude=unasked)


def recorded_floors(phases: list[PhaseFloor]) -> dict[str, float]:
    """The floors of the timings a record keeps, from the phases an estimate was checked
    against."""
    kept = set(Floored.__args__)
    return {FIGURES[p.phase]: p.floor()[0] for p in phases if FIGURES.get(p.phase) in kept}
