"""The tensor-parallel engines' design spaces: which parameters `archi explore` may move,
and their candidate values (seeds/002 §V-D: "define a set of candidate values for each
hardware parameter").

Dependent parameters are encoded so every gene combination is valid: the tile side is a
multiple of the array side, and the vector-mode tiles never need more PEs than the array has.
"""

from typing import Any

from archipelago.explore.spaces import DesignSpace
from archipelago.strategies.tensor_parallel import LORA_F as LORA_F_DESIGN
from archipelago.strategies.tensor_parallel import LORA_Q as LORA_Q_DESIGN

_SYSTOLIC: dict[str, tuple[Any, ...]] = {
    "d_sa": (8, 16, 24, 32, 40, 48, 64), "t_m_per_d_sa": (1, 2, 4), "t_v_divisor": (1, 2, 4),
    "n_acc": (16, 32, 64, 128, 256), "hbm_axi_bits": (256, 512),
    "kv_uram": (0, 256, 512, 704, 864), "token_window": (16, 32, 64, 128)}


def _systolic(genes: dict[str, Any]) -> dict[str, Any]:
    d_sa = genes["d_sa"]
    t_m = d_sa * genes["t_m_per_d_sa"]
    return {"d_sa": d_sa, "t_m": t_m, "t_v": max(1, d_sa * d_sa // t_m // genes["t_v_divisor"]),
            "n_acc": genes["n_acc"], "hbm_axi_bits": genes["hbm_axi_bits"],
            "kv_uram": genes["kv_uram"], "token_window": genes["token_window"],
            "clock_hz": genes["clock_hz"]}


def _dfx(genes: dict[str, Any]) -> dict[str, Any]:
    """seeds/001 §V-B: (d, l) pairs that keep d x l = 1024 values per cycle."""
    return {"d": genes["d"], "l": 1024 // genes["d"], "window_tokens": genes["window_tokens"]}


def _systolic_baseline(design: dict[str, Any]) -> dict[str, Any]:
    """A published LORA prototype (the strategies' registration, seeds/002 §VI-A-d) as
    genes: tiles as wide as the array, every PE in vector mode (t_v = d_sa^2 / t_m)."""
    genes = {name: design[name] for name in
             ("d_sa", "n_acc", "hbm_axi_bits", "kv_uram", "token_window", "clock_hz")}
    return {**genes, "t_m_per_d_sa": design["t_m"] // design["d_sa"],
            "t_v_divisor": design["d_sa"] ** 2 // design["t_m"] // design["t_v"]}


# Clocks up to each prototype's published one (seeds/002 Table IV); faster clocks are not
# offered because the model has no timing-closure term to say they would be met. Strategies
# name their space when they register (`design_space=".../space:LORA_F"`).
LORA_F = DesignSpace({**_SYSTOLIC, "clock_hz": (150e6, 200e6)}, _systolic,
                     _systolic_baseline(LORA_F_DESIGN))
LORA_Q = DesignSpace({**_SYSTOLIC, "clock_hz": (150e6, 200e6, 250e6)}, _systolic,
                     _systolic_baseline(LORA_Q_DESIGN))
DFX = DesignSpace({"d": (8, 16, 32, 64, 128), "window_tokens": (16, 32, 64, 128)}, _dfx,
                  {"d": 64, "window_tokens": 64})  # seeds/001 §V-B
