"""The phases of a text generation whose floors the pipeline checks (estimate/floors.py),
alike for every text-generation kind: the prompt's prefill, the first and the last decode
step, and the mean decode step (no less than the first step's floor: a step's floor grows
with the KV cache it reads). Each kind says what its devices must do in a pass
(`PassWork` -> its `DeviceLoad`s)."""

from collections.abc import Callable
from dataclasses import dataclass

from archipelago.estimate.floors import DeviceLoad, PhaseFloor
from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation


@dataclass(frozen=True)
class PassWork:
    """One pass of `sequences` sequences, `new_tokens` each, every sequence attending to
    `cached` tokens of its KV cache that earlier passes wrote (read from memory)."""

    new_tokens: int
    sequences: int
    cached: int

    @property
    def tokens(self) -> int:
        """Every sequence's new tokens: what routes to the experts together."""
        return self.new_tokens * self.sequences


Loads = Callable[[PassWork], tuple[DeviceLoad, ...]]

# Each phase's name and the GenerationTiming figure it bounds.
FIGURES = {"prefill": "prefill_s", "the first decode step": "decode_s_first",
           "the last decode step": "decode_s_last",
           "the mean decode step": "decode_s_per_token"}
PREFILL, FIRST, LAST, MEAN = FIGURES


def generation_floors(est: GenerationTiming, work: Generation, loads: Loads
                      ) -> list[PhaseFloor]:
    """Prefill, then (with decode steps) decode's first, last and mean step. The first
    decode step attends to the prompt (`input_tokens` cached), the last to all but the
    last two tokens (the last output token is sampled from it, and it adds its own)."""
    batch = work.batch
    floors = [PhaseFloor(PREFILL, est.prefill_s, loads(PassWork(work.input_tokens, batch, 0)))]
    if work.output_tokens > 1:
        first = loads(PassWork(1, batch, work.input_tokens))
        last = loads(PassWork(1, batch, work.total_tokens - 2))
        floors += [PhaseFloor(FIRST, est.decode_s_first, first),
                   PhaseFloor(LAST, est.decode_s_last, last),
                   PhaseFloor(MEAN, est.decode_s_per_token, first)]
    return floors
