"""Archipelago: plan, estimate, emulate and emit deployments of models on FPGA clusters.

The package root stays free of torch so that `import archipelago` and `archi plan` are fast.
"""

from archipelago.errors import ArchipelagoError

__all__ = ["ArchipelagoError", "__version__"]
__version__ = "0.1.0"
