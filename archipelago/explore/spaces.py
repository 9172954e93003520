"""Design spaces of the engines: which parameters a search may move, and their candidate
values (seeds/002 §V-D: "define a set of candidate values for each hardware parameter").

Dependent parameters are encoded so every sample is valid: the tile side is a multiple of
the array side, and the vector-mode tiles never need more PEs than the array has.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from archipelago.errors import ArchipelagoError
from archipelago.strategies.registry import get_strategy, resolve, strategies


class Trial(Protocol):
    def suggest_categorical(self, name: str, choices: list[Any]) -> Any: ...


def _systolic(clocks: list[float]) -> Callable[[Trial], dict[str, Any]]:
    def sample(trial: Trial) -> dict[str, Any]:
        d_sa = trial.suggest_categorical("d_sa", [8, 16, 24, 32, 40, 48, 64])
        t_m = d_sa * trial.suggest_categorical("t_m_per_d_sa", [1, 2, 4])
        t_v = max(1, d_sa * d_sa // t_m // trial.suggest_categorical("t_v_divisor", [1, 2, 4]))
        return {
            "d_sa": d_sa, "t_m": t_m, "t_v": t_v,
            "n_acc": trial.suggest_categorical("n_acc", [16, 32, 64, 128, 256]),
            "hbm_axi_bits": trial.suggest_categorical("hbm_axi_bits", [256, 512]),
            "kv_uram": trial.suggest_categorical("kv_uram", [0, 256, 512, 704, 864]),
            "token_window": trial.suggest_categorical("token_window", [16, 32, 64, 128]),
            "clock_hz": trial.suggest_categorical("clock_hz", clocks),
        }

    return sample


def _dfx(trial: Trial) -> dict[str, Any]:
    """seeds/001 §V-B: (d, l) pairs that keep d x l = 1024 values per cycle."""
    d = trial.suggest_categorical("d", [8, 16, 32, 64, 128])
    return {"d": d, "l": 1024 // d,
            "window_tokens": trial.suggest_categorical("window_tokens", [16, 32, 64, 128])}


@dataclass(frozen=True)
class DesignSpace:
    """A sampler, and the published design point in its encoding, tried first so a search
    never returns anything worse than the paper's own configuration."""

    sample: Callable[[Trial], dict[str, Any]]
    baseline: dict[str, Any]


def _systolic_baseline(clock_hz: float, d_sa: int) -> dict[str, Any]:
    """A strategy's default engine in the space's encoding: a D_sa x D_sa array with tiles as
    wide (LORA-F: 32 x 32 of §V-C; LORA-Q: the HBM-bound 64 x 64), 864 KV URAMs."""
    return {"d_sa": d_sa, "t_m_per_d_sa": 1, "t_v_divisor": 1, "n_acc": 64,
            "hbm_axi_bits": 512, "kv_uram": 864, "token_window": 64, "clock_hz": clock_hz}


# Clocks up to each prototype's published one (seeds/002 Table IV); faster clocks are not
# offered because the model has no timing-closure term to say they would be met. Strategies
# name their space when they register (`design_space="archipelago.explore.spaces:LORA_F"`).
LORA_F = DesignSpace(_systolic([150e6, 200e6]), _systolic_baseline(200e6, 32))
LORA_Q = DesignSpace(_systolic([150e6, 200e6, 250e6]), _systolic_baseline(250e6, 64))
DFX = DesignSpace(_dfx, {"d": 64, "window_tokens": 64})  # seeds/001 §V-B


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
