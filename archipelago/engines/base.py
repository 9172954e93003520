"""What every compute-core model provides, and the shared arithmetic of on-chip memories."""

from collections.abc import Callable
from math import log2
from typing import Any, ClassVar, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from archipelago.hardware.device import Resources


class EngineConfig(BaseModel):
    """Design parameters of a compute core: validated once where the user gives them
    (unknown keys and out-of-range values are refused, with the key named), then frozen."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    # Where the core's instruction set is described (its programs can be built and run on a
    # simulator), or None: a core the papers give as hardware only. A class fact, so the
    # registry can say which strategies have one without planning (`Strategy.instruction_set`).
    instruction_set: ClassVar[str | None] = None


# Upper bounds shared by every engine's parameters: far past any design in the seeds (the
# fastest kernel clock there is 500 MHz, the widest datapath 512 bits, the largest array
# 128 x 128), they only stop typos whose sizes overflow or stall the estimators.
MAX_CLOCK_HZ = 2e9
# Lower bounds likewise: no kernel clocks under 1 MHz nor streams under 1 MB/s, and a
# denormal clock (5e-324 Hz) would turn every time into infinity.
MIN_CLOCK_HZ = 1e6
MIN_BANDWIDTH_BPS = 1e6
MIN_UTILIZATION = 0.01
MAX_BITS = 4096
MAX_DIM = 2**16
MAX_CHANNELS = 1024
MAX_BANDWIDTH_BPS = 1e14
# A token count far above any model's context (the zoo's longest is 4096): larger numbers
# are typos, and overflow the estimators' integer arrays. Bounds --tokens and --seq-len too.
MAX_TOKENS = 2**20


class Engine(Protocol):
    """Every compute-core model: a name and its design parameters (`config`, the fields a
    design-space search varies). Each plan kind extends this with what its estimator asks
    (`plan.StepEngine`: seconds per plan step, resources of a core; the streaming engines:
    kernel designs, cycles per row, resources of a design)."""

    name: ClassVar[str]
    config: EngineConfig


# An engine's cycles for one op kind: (step, new tokens, context lengths) -> cycles.
CycleHandler = Callable[[Any, int, np.ndarray], Any]


def dispatch_cycles(handlers: dict[str, CycleHandler], unit: str, step: Any,
                    phase: Any) -> np.ndarray:
    """Cycles of `step` from its op kind's handler, broadcast over the phase's contexts;
    an op kind the engine has no unit for is a planner bug, not a user error."""
    handler = handlers.get(step.op.kind)
    if handler is None:
        raise AssertionError(f"{unit} has no unit for op kind {step.op.kind}")
    t = np.asarray(phase.context)
    return np.zeros(t.shape) + handler(step, phase.new_tokens, t)


def ceil_div(a: np.ndarray | int, b: int) -> np.ndarray | int:
    return -(-a // b)


# A figure of one core's (a number), or of many cores' at once (an array with the variants
# of a design search on its leading axis, e.g. systolic_config.SystolicVariants).
Number = int | float | np.ndarray


def least(a: Number, b: Number) -> Number:
    """min(a, b), elementwise where either holds variants; a plain number for one core
    (numpy is slow on numbers)."""
    return np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) \
        else min(a, b)


def most(a: Number, b: Number) -> Number:
    """max(a, b), elementwise where either holds variants; a plain number for one core."""
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) \
        else max(a, b)


def floor_log2(x: int | np.ndarray) -> int | np.ndarray:
    """floor(log2(x)) of a positive integer, or of each of an array's (exactly: frexp
    gives x = m 2^e with m in [0.5, 1))."""
    if isinstance(x, np.ndarray):
        return np.frexp(x)[1].astype(np.int64) - 1
    return int(log2(x))


def add_resources(*parts: Resources) -> Resources:
    """The sum of `parts`, each distinct object read once (a core's buffers repeat one block
    per lane or channel: `[block] * l`); counts are integers, so the order is immaterial."""
    times: dict[int, int] = {}
    for part in parts:
        times[id(part)] = times.get(id(part), 0) + 1
    distinct = {id(part): part for part in parts}
    return Resources(**{f: sum(getattr(distinct[i], f) * n for i, n in times.items())
                        for f in _RESOURCE_FIELDS})


_RESOURCE_FIELDS = tuple(Resources.model_fields)


# FP16 operator latencies of the Floating-Point Operator IP on UltraScale+ DSPs, in cycles
# (seeds/001 §V-C: "The multiplier takes 6 cycles, and the adder takes 11 cycles"; the
# exponential 4). LORA builds its FP16 units from the same IP on the same U280 (seeds/002
# §IV-B, [65]).
FP16_MUL_CYCLES = 6
FP16_ADD_CYCLES = 11
FP16_EXP_CYCLES = 4
# Not stated in either paper: reciprocal and reciprocal square root run on the same
# floating-point DSPs (seeds/001 §V-C SFU_V); taken at the multiplier's latency.
FP16_RECIP_CYCLES = FP16_MUL_CYCLES


# On-chip memory primitives of UltraScale+ devices (UG573): a RAMB36E2 is 36 Kb and, at its
# widest, 512 x 72 bits; a URAM288 is 4096 x 72 bits.
BRAM36_WIDTH, BRAM36_DEPTH = 72, 512
URAM_WIDTH, URAM_DEPTH = 72, 4096


def memory_blocks(width_bits: int, depth: int) -> Resources:
    """Blocks for a width x depth buffer: shallow buffers in BRAM, deep ones in URAM."""
    return Resources(**block_counts(width_bits, depth))


def block_counts(width_bits: Number, depth: Number) -> dict[str, Number]:
    """`memory_blocks`' BRAM and URAM counts, elementwise where the sizes hold variants."""
    deep = depth >= URAM_DEPTH
    return {"bram": ceil_div(width_bits, BRAM36_WIDTH) * ceil_div(depth, BRAM36_DEPTH)
            * (depth < URAM_DEPTH),
            "uram": ceil_div(width_bits, URAM_WIDTH) * ceil_div(depth, URAM_DEPTH) * deep}
