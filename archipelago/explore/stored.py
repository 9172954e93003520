"""What a search keeps in its study's journal, validated whenever it is read back: a study
file is shared and outlives the run, so another program, an older version or a damaged file
may have written anything in it."""

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from archipelago.errors import ArchipelagoError

Stored = TypeVar("Stored", bound=BaseModel)


class DamagedStudy(ArchipelagoError):
    """A record explore wrote is not what explore writes; the search that opened the study
    names the storage and the study around this message."""


class TrialRecord(BaseModel):
    """One finished trial, keyed in the journal by its engine: the genes the search chose,
    the engine they decode to, and what the kind's estimator said of it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    genes: dict[str, Any]
    engine: dict[str, Any]
    latency_s: float
    tokens_per_s: float
    feasible: bool
    utilization: dict[str, float]


def read_stored(model: type[Stored], value: Any, what: str) -> Stored:
    """`value` as `model`; DamagedStudy naming `what` and the first problem otherwise."""
    try:
        return model.model_validate(value)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        at = f" field '{field}'" if field else ""
        raise DamagedStudy(f"{what}{at}: {first['msg']} (got {repr(first['input'])[:40]})"
                           ) from None
