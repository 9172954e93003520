"""The built-in clusters' names under the name `archi catalog` imports them by; delete this
module once cli.catalog lists the registered cluster families (issue 19, point 3)."""

from archipelago.hardware.cluster_file import builtin_clusters as builtin_hetero_clusters

__all__ = ["builtin_hetero_clusters"]
