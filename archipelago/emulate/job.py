"""One emulation request: the workload its plan kind parsed, plus weights, seed, precision
and the watchdog's patience. The plan itself travels beside it (the pipeline builds it, or,
under torchrun, each rank's own pipeline does from the same arguments), so nothing here
reaches back up to the pipeline."""

from dataclasses import dataclass
from typing import Any

from archipelago.errors import ArchipelagoError, UnknownNameError

# The quantized formats a tensor-parallel emulation runs (`--precision`; their arithmetic in
# strategies/tensor_parallel/emulate/quant_formats.py), beside the float ones.
QUANTIZED_PRECISIONS = ("w8a8", "w4a16")
PRECISIONS = ("fp32", "fp16", *QUANTIZED_PRECISIONS)
# torch.manual_seed takes a signed 64-bit seed; negative ones are refused as user mistakes.
MAX_SEED = 2**63 - 1
# A day: a longer watchdog patience is a typo, and past ~2^31 s gloo's timeout overflows.
MAX_TIMEOUT_S = 86_400.0


@dataclass(frozen=True)
class EmulationJob:
    """`checkpoint` is the user's directory (None: random weights from `seed`);
    `weights_dir` is where ranks actually read safetensors, set by the launcher; `model`
    the user's model argument."""

    workload: Any
    seed: int = 0
    precision: str = "fp32"
    checkpoint: str | None = None
    timeout_s: float = 30.0
    weights_dir: str | None = None
    model: str | None = None
    """The model argument as given: an emulator that checks a split run against the
    model's own file (an ONNX file run by onnxruntime) reads it."""

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UnknownNameError("precision", self.precision, PRECISIONS)
        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise ArchipelagoError(f"--timeout {self.timeout_s}: must be a number of seconds "
                                   f"in (0, {MAX_TIMEOUT_S:g}]")
        if not 0 <= self.seed <= MAX_SEED:
            raise ArchipelagoError(f"--seed {self.seed}: must be in 0..{MAX_SEED}")
