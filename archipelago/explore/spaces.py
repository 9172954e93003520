"""Design spaces: what a strategy's engine search may move (each kind defines its own in
its package's `space` module and names it when it registers), and the lookup by strategy."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from archipelago.errors import ArchipelagoError
from archipelago.strategies.registry import get_strategy, resolve, strategies


class Trial(Protocol):
    def suggest_categorical(self, name: str, choices: list[Any]) -> Any: ...


@dataclass(frozen=True)
class DesignSpace:
    """A sampler, and the published design point in its encoding, tried first so a search
    never returns anything worse than the paper's own configuration."""

    sample: Callable[[Trial], dict[str, Any]]
    baseline: dict[str, Any]


def design_space(strategy: str) -> DesignSpace:
    """The space strategy `strategy` registered; an error naming the strategies `archi
    explore` takes (those with a space, and those whose plan kind explores by itself)."""
    path = get_strategy(strategy).design_space
    if path is None:
        explorable = sorted(n for n, s in strategies().items()
                            if s.design_space or s.plan_kind.explorer)
        raise ArchipelagoError(f"strategy '{strategy}' has no engine design space to explore; "
                               f"explorable: {', '.join(explorable)}")
    return resolve(path)
