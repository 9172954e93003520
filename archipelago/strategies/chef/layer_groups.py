"""Which group a scheduled DAG's layer is drawn in: its model where the DAG holds several
(a multi-model deployment), else its modality. The report page and `--gantt` colour the
same bars, so they group them here, once, without plotly."""

from typing import Any


def _prefix(names: list[str]) -> str:
    """The characters all `names` begin with (those of the first and last in order)."""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def models(layers: Any) -> dict[str, str]:
    """Each layer's model: the parts of the DAG no data flows between (union-find over the
    dependencies), named by their layers' common name prefix ('cam_conv1', 'cam_fc': 'cam')
    where the parts' prefixes differ, else 'model 1', 'model 2' in order of first layer."""
    parent = {la.name: la.name for la in layers}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for la in layers:
        for d in la.deps:
            parent[root(d)] = root(la.name)
    parts: dict[str, list[str]] = {}
    for la in layers:
        parts.setdefault(root(la.name), []).append(la.name)
    prefixes = [_prefix(names).rstrip("_.-/:") for names in parts.values()]
    named = all(len(p) >= 2 for p in prefixes) and len(set(prefixes)) == len(prefixes)
    return {n: prefixes[k] if named else f"model {k + 1}"
            for k, names in enumerate(parts.values()) for n in names}


def colour_groups(layers: Any) -> tuple[dict[str, str], str]:
    """(layer -> the group its bar is coloured by, the legend's title): the layer's model
    where the DAG has several parts no data flows between, else its modality."""
    model = models(layers)
    if len(set(model.values())) > 1:
        return model, "model"
    return {la.name: la.modality for la in layers}, "modality"
