"""What a study is: everything that defines its search space and objectives, by content.

A study name is only a label; the identity stored with the study decides whether a run may
add trials to it. Two config files with the same content are the same model wherever they
live, and two different ones are never mixed because their files share a name.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.explore.stored import StoredIdentity, read_stored

# Both minimized (seeds/002 §V-D, Eq. 13): end-to-end latency, and the worst fabric
# resource fraction used (DSP, BRAM or URAM) on any device.
OBJECTIVES = ("latency_s", "fabric_fraction")
DIRECTIONS = ("minimize", "minimize")
IDENTITY_ATTR = "identity"


def _digest(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StudyIdentity:
    """`key` decides equality (content digests, no file names); `labels` are for people."""

    key: dict[str, str]
    labels: dict[str, str]

    @property
    def digest(self) -> str:
        return _digest(self.key)

    def describe(self, fields: list[str]) -> str:
        return ", ".join(f"{f} {self.labels.get(f, self.key.get(f, '?'))}" for f in fields)


def _workload_text(workload: Any) -> str:
    """The parsed workload in a few characters: its values joined, e.g. 8x8 for 8:8 tokens."""
    values = asdict(workload).values() if is_dataclass(workload) else [workload]
    return "x".join(str(v) for v in values)


def study_identity(model: str, cluster: str, strategy: str, workload: Any) -> StudyIdentity:
    """The identity of a search (`workload` as the strategy's plan kind parsed it); resolves
    model and cluster, so bad names fail here."""
    from archipelago.api import make_plan
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.models.zoo import resolve_model

    spec, machines = resolve_model(model), resolve_cluster(cluster)
    engine = type(make_plan(model, cluster, strategy).engine).__name__
    model_key = _digest(spec.model_dump(exclude={"name"}))
    cluster_key = _digest(machines.model_dump(exclude={"name"}))
    objectives = ", ".join(f"{d} {o}" for d, o in zip(DIRECTIONS, OBJECTIVES, strict=True))
    key = {"model": model_key, "cluster": cluster_key, "strategy": strategy, "engine": engine,
           "workload": repr(workload), "objectives": objectives}
    labels = {"model": f"{spec.name} (config {model_key[:8]})",
              "cluster": f"{machines.name} ({cluster_key[:8]})",
              "workload": _workload_text(workload)}
    return StudyIdentity(key, labels)


def _safe(text: str) -> str:
    """A file-name-safe word: no path separators, no spaces."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


def check_study_name(name: str) -> str:
    """A --study is a name as the project's names are (printable, one line, at most 200
    characters): the default --out is named after it."""
    from pydantic import TypeAdapter, ValidationError

    from archipelago.names import Name

    try:
        return TypeAdapter(Name).validate_python(name)
    except ValidationError as err:
        problem = err.errors()[0]["msg"].removeprefix("Value error, ")
        raise ArchipelagoError(f"--study '{name[:60]}': {problem}") from None


def default_study_name(identity: StudyIdentity) -> str:
    """Readable, and unique per identity: the digest tells same-named models apart."""
    model = identity.labels["model"].split(" (")[0]
    machines = identity.labels["cluster"].split(" (")[0]
    parts = (model, machines, identity.key["strategy"], identity.labels["workload"])
    return "-".join(_safe(p) for p in parts) + f"-{identity.digest[:8]}"


def claim(study: Any, identity: StudyIdentity, where: str) -> None:
    """Record `identity` on a new study; refuse a study that holds another search, or whose
    objectives are not explore's (optuna loads an existing study whatever its directions)."""
    stored = study.user_attrs.get(IDENTITY_ATTR)
    refuse = (f"study '{study.study_name}' in {where} holds another search; choose another "
              "--study (or --storage)")
    if stored is None and study.get_trials(deepcopy=False):
        raise ArchipelagoError(f"{refuse}: it has trials but no recorded identity")
    directions = tuple(d.name.lower() for d in study.directions)
    if directions != DIRECTIONS:
        raise ArchipelagoError(f"{refuse}: its objectives are to {', '.join(directions)}; "
                               f"explore's are to {', '.join(DIRECTIONS)} "
                               f"{', '.join(OBJECTIVES)}")
    if stored is None:
        study.set_user_attr(IDENTITY_ATTR, {"key": identity.key, "labels": identity.labels})
        return
    theirs = read_stored(StoredIdentity, stored, f"its attribute '{IDENTITY_ATTR}'")
    if theirs.key != identity.key:
        fields = [*identity.key, *(f for f in theirs.key if f not in identity.key)]
        differ = [f for f in fields if theirs.key.get(f) != identity.key.get(f)]
        raise ArchipelagoError(f"{refuse}: it was made for "
                               f"{StudyIdentity(theirs.key, theirs.labels).describe(differ)}; "
                               f"this run is for {identity.describe(differ)}")
