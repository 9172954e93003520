"""What a study is: everything that defines its search space and objectives, by content.

A study name is only a label; the identity in its journal's header decides whether a run may
add trials to it (archipelago.batch.journal refuses another one, naming the field that
differs). Two config files with the same content are the same model wherever they live, and
two different ones are never mixed because their files share a name.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from archipelago.errors import ArchipelagoError

# Both minimized (seeds/002 §V-D, Eq. 13): end-to-end latency, and the worst fabric
# resource fraction used (DSP, BRAM or URAM) on any device.
OBJECTIVES = ("latency_s", "fabric_fraction")
DIRECTIONS = ("minimize", "minimize")


def digest(content: Any) -> str:
    """A short content digest: JSON with sorted keys, SHA-256, 16 hex digits."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StudyIdentity:
    """`key` decides equality (content digests, no file names); `labels` are for people."""

    key: dict[str, str]
    labels: dict[str, str]

    @property
    def digest(self) -> str:
        return digest(self.key)


def _workload_text(workload: Any) -> str:
    """The parsed workload in a few characters: its values joined, e.g. 8x8 for 8:8 tokens."""
    values = asdict(workload).values() if is_dataclass(workload) else [workload]
    return "x".join(str(v) for v in values)


def study_identity(model: str, cluster: str, strategy: str, workload: Any) -> StudyIdentity:
    """The identity of a search (`workload` as the strategy's plan kind parsed it; the
    space's genes and their choices included); resolves model and cluster, so bad names
    fail here."""
    from archipelago.api import make_plan
    from archipelago.explore.spaces import space_builder
    from archipelago.hardware.cluster import resolve_cluster
    from archipelago.models.zoo import resolve_model

    spec, machines = resolve_model(model), resolve_cluster(cluster)
    engine = type(make_plan(model, cluster, strategy).engine).__name__
    model_key = digest(spec.model_dump(exclude={"name"}))
    cluster_key = digest(machines.model_dump(exclude={"name"}))
    objectives = ", ".join(f"{d} {o}" for d, o in zip(DIRECTIONS, OBJECTIVES, strict=True))
    space = space_builder(strategy)(spec, machines.devices[0], workload)
    key = {"model": model_key, "cluster": cluster_key, "strategy": strategy, "engine": engine,
           "space": digest({name: list(choices) for name, choices in space.genes.items()}),
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
