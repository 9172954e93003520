"""The tensor-parallel engines' design spaces: which parameters `archi explore` may move,
and their candidate values (seeds/002 §V-D: "define a set of candidate values for each
hardware parameter").

Dependent parameters are encoded so every sample is valid: the tile side is a multiple of
the array side, and the vector-mode tiles never need more PEs than the array has.
"""

from collections.abc import Callable
from typing import Any

from archipelago.explore.spaces import DesignSpace, Trial


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



def _systolic_baseline(clock_hz: float, d_sa: int) -> dict[str, Any]:
    """A strategy's default engine in the space's encoding: a D_sa x D_sa array with tiles as
    wide (LORA-F: 32 x 32 of §V-C; LORA-Q: the HBM-bound 64 x 64), 864 KV URAMs."""
    return {"d_sa": d_sa, "t_m_per_d_sa": 1, "t_v_divisor": 1, "n_acc": 64,
            "hbm_axi_bits": 512, "kv_uram": 864, "token_window": 64, "clock_hz": clock_hz}


# Clocks up to each prototype's published one (seeds/002 Table IV); faster clocks are not
# offered because the model has no timing-closure term to say they would be met. Strategies
# name their space when they register (`design_space=".../space:LORA_F"`).
LORA_F = DesignSpace(_systolic([150e6, 200e6]), _systolic_baseline(200e6, 32))
LORA_Q = DesignSpace(_systolic([150e6, 200e6, 250e6]), _systolic_baseline(250e6, 64))
DFX = DesignSpace(_dfx, {"d": 64, "window_tokens": 64})  # seeds/001 §V-B


