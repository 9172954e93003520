"""What a search keeps in its study's storage, validated whenever it is read back: a storage
is shared and outlives the run, so another program, an older version or a damaged file may
have written anything under the names explore uses.
"""

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archipelago.errors import ArchipelagoError

Stored = TypeVar("Stored", bound=BaseModel)


class DamagedStudy(ArchipelagoError):
    """A study attribute explore wrote is not what explore writes; the search that opened
    the study names the storage and the study around this message."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class StoredIdentity(_Record):
    """The study's `identity` attribute (explore.study.StudyIdentity as written)."""

    key: dict[str, str]
    labels: dict[str, str] = {}


class TrialResult(_Record):
    """A finished trial's `result` attribute: the engine it evaluated and what it used."""

    engine: dict[str, Any]
    utilization: dict[str, float]
    tokens_per_s: float


class Worker(_Record):
    """A trial's `worker` attribute: the run that took it (explore.trials.this_run)."""

    host: str
    pid: int = Field(gt=0)  # 0 and negatives would name process groups to os.kill
    start: str | None
    search: str | None = None


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
