"""One emulation request: the arguments `archi plan` takes plus weights, seed and precision.
The launcher builds the Plan from it once with `archipelago.api.make_plan` (under torchrun,
each rank does, from the same arguments) and hands both to every rank."""

from dataclasses import dataclass

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError, UnknownNameError
from archipelago.estimate.workload import Generation, parse_tokens
from archipelago.plan import Plan

PRECISIONS = ("fp32", "fp16")


@dataclass(frozen=True)
class EmulationJob:
    """`checkpoint` is the user's directory (None: random weights from `seed`);
    `weights_dir` is where ranks actually read safetensors, set by the launcher."""

    model: str
    cluster: str
    strategy: str
    tokens: str
    seed: int = 0
    precision: str = "fp32"
    checkpoint: str | None = None
    timeout_s: float = 30.0
    weights_dir: str | None = None

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UnknownNameError("precision", self.precision, PRECISIONS)
        if not self.timeout_s > 0:
            raise ArchipelagoError(f"--timeout {self.timeout_s}: must be a positive number of "
                                   "seconds")

    def plan(self) -> Plan:
        return make_plan(self.model, self.cluster, self.strategy)

    def workload(self) -> Generation:
        return parse_tokens(self.tokens)
