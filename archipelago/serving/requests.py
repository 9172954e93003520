"""The requests a simulation serves: arrival times, prompt and output lengths. Arrivals are
kept at unit rate (`unit_arrivals`) and scaled to a rate when simulated, so a capacity
search at many rates serves the same requests, only closer together (common random numbers:
the search compares rates, not draws).

Lengths come from a stated distribution (DIST texts: `512`, `fixed:512`,
`lognormal:MEDIAN,SIGMA` with SIGMA the log's standard deviation, `uniform:LO,HI` whole
numbers inclusive) or from a trace file (trace.py). Every stream has its own seeded
generator, so changing one distribution leaves the others' draws alone."""

import re
from dataclasses import dataclass

import numpy as np

from archipelago.errors import ArchipelagoError

MAX_REQUESTS = 1_000_000  # a simulation's requests: past every published trace's day
ARRIVALS = ("poisson", "fixed")
_NUMBER = r"([0-9]{1,9}(?:\.[0-9]{1,9})?)"


@dataclass(frozen=True)
class Lengths:
    """A token-count distribution: `fixed` (a = the count), `lognormal` (a = median,
    b = sigma of the log), `uniform` (a..b inclusive)."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            values = np.full(n, self.a)
        elif self.kind == "lognormal":
            values = np.round(rng.lognormal(np.log(self.a), self.b, n))
        else:
            values = rng.integers(int(self.a), int(self.b) + 1, n)
        return np.maximum(values, 1).astype(np.int64)


def parse_lengths(option: str, text: str, limit: int) -> Lengths:
    """`512`, `fixed:512`, `lognormal:MEDIAN,SIGMA` or `uniform:LO,HI`; counts in 1..limit,
    SIGMA in 0..3 (a wider log spread puts most draws at the clip)."""
    t = text.strip().lower()
    usage = (f"{option} '{text[:40]}': give N, fixed:N, lognormal:MEDIAN,SIGMA or "
             f"uniform:LO,HI (token counts 1..{limit})")
    if m := re.fullmatch(rf"(?:fixed:)?{_NUMBER}", t):
        dist = Lengths("fixed", float(m.group(1)))
    elif m := re.fullmatch(rf"lognormal:{_NUMBER},{_NUMBER}", t):
        dist = Lengths("lognormal", float(m.group(1)), float(m.group(2)))
        if dist.b > 3:
            raise ArchipelagoError(f"{option} '{text[:40]}': SIGMA must be in 0..3")
    elif m := re.fullmatch(rf"uniform:{_NUMBER},{_NUMBER}", t):
        dist = Lengths("uniform", float(m.group(1)), float(m.group(2)))
        if dist.b < dist.a:
            raise ArchipelagoError(f"{option} '{text[:40]}': LO must not exceed HI")
    else:
        raise ArchipelagoError(usage)
    counts = (dist.a,) if dist.kind == "lognormal" else (dist.a, dist.b or dist.a)
    if any(c != int(c) or not 1 <= c <= limit for c in counts):
        raise ArchipelagoError(usage)
    return dist


@dataclass(frozen=True)
class Requests:
    """`unit_arrivals`: arrival times at one request per second (scaled by 1 / rate when
    served); `prompt`, `output`: each request's token counts."""

    unit_arrivals: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    clipped: int = 0  # requests shortened to fit the model's positions

    def __len__(self) -> int:
        return len(self.prompt)

    def at(self, rate: float) -> np.ndarray:
        """Arrival times at `rate` requests per second."""
        return self.unit_arrivals / rate


def unit_arrivals(process: str, n: int, seed: int) -> np.ndarray:
    """`poisson`: exponential gaps of mean 1 (a Poisson process at rate 1); `fixed`: one
    request every second; both from 0."""
    if process == "fixed":
        return np.arange(n, dtype=float)
    gaps = np.random.default_rng([seed, 0]).standard_exponential(n)
    return np.concatenate(([0.0], np.cumsum(gaps[1:])))


def fitted(unit: np.ndarray, prompt: np.ndarray, output: np.ndarray, max_context: int
           ) -> Requests:
    """Requests with lengths clipped so that prompt + output fits the model's positions
    (the prompt first keeps one position for the output), the clipped ones counted."""
    prompts = np.minimum(prompt, max_context - 1)
    outputs = np.minimum(output, max_context - prompts)
    clipped = int(np.count_nonzero((prompts != prompt) | (outputs != output)))
    return Requests(unit, prompts, outputs, clipped)


def check_arrivals(process: str) -> None:
    if process not in ARRIVALS:
        raise ArchipelagoError(f"--arrivals '{process[:20]}': valid choices are "
                               f"{', '.join(ARRIVALS)}")


def generate(process: str, n: int, prompt: Lengths, output: Lengths, seed: int,
             max_context: int) -> Requests:
    """`n` requests arriving by `process`, their lengths drawn and fitted."""
    check_arrivals(process)
    if not 1 <= n <= MAX_REQUESTS:
        raise ArchipelagoError(f"--requests {n}: must be in 1..{MAX_REQUESTS}")
    return fitted(unit_arrivals(process, n, seed),
                  prompt.draw(np.random.default_rng([seed, 1]), n),
                  output.draw(np.random.default_rng([seed, 2]), n), max_context)
