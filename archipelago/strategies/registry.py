"""Strategies looked up by name: a registry instead of if/elif chains on strings."""

from collections.abc import Callable
from dataclasses import dataclass

from archipelago.errors import UnknownNameError


@dataclass(frozen=True)
class StrategyInfo:
    """`workload` says what the plans estimate: text `generation` (IN:OUT tokens) or an
    `encoder` pass over a sequence (`--seq-len`)."""

    name: str
    summary: str
    planner: Callable
    workload: str = "generation"


_REGISTRY: dict[str, StrategyInfo] = {}


def register(name: str, summary: str,
             workload: str = "generation") -> Callable[[Callable], Callable]:
    def wrap(planner: Callable) -> Callable:
        assert name not in _REGISTRY, f"strategy {name} registered twice"
        _REGISTRY[name] = StrategyInfo(name, summary, planner, workload)
        return planner

    return wrap


def strategies() -> dict[str, StrategyInfo]:
    _load_builtin()
    return dict(_REGISTRY)


def get_strategy(name: str) -> StrategyInfo:
    _load_builtin()
    if name not in _REGISTRY:
        raise UnknownNameError("strategy", name, _REGISTRY)
    return _REGISTRY[name]


def _load_builtin() -> None:
    """Importing a strategy module registers it; done lazily to keep imports light."""
    from archipelago.strategies import galapagos, tensor_parallel  # noqa: F401
