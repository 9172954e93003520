"""What a layer DAG holds, in the figures a user checks an import against a model card by:
layers by type, parameters (every layer's weight_elements: weights, biases, normalization
parameters), multiply-accumulates, and the operators the importer constant-folded
(`ModelDAG.folded`) or merged into a layer (`BaseLayer.fused`)."""

from collections import Counter
from typing import Any

from archipelago.models.dag import ModelDAG


def model_summary(dag: ModelDAG) -> dict[str, Any]:
    """The JSON object `archi plan --json` prints as `model_summary`."""
    fused = Counter(op for layer in dag.layers for op in layer.fused)
    return {
        "layers": len(dag.layers),
        "layers_by_type": dict(sorted(Counter(la.type for la in dag.layers).items())),
        "parameters": sum(la.weight_elements for la in dag.layers),
        "macs": sum(la.macs for la in dag.layers),
        "folded": dict(sorted(dag.folded.items())),
        "fused": dict(sorted(fused.items())),
    }


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary as two lines of text: the model's size, then every operator folded or
    fused by name."""
    return [f"model: {summary['layers']} layers ({_counts(summary['layers_by_type'])}), "
            f"{summary['parameters'] / 1e6:,.2f} M parameters, "
            f"{summary['macs'] / 1e9:,.3f} GMAC",
            f"folded: {_counts(summary['folded'])}; fused: {_counts(summary['fused'])}"]
