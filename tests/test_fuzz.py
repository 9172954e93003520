"""The fuzz suite in `make test`: a few hundred hostile inputs of every kind (cluster files,
engine configs per engine, model configs per family, CLI option strings, emulate's seed,
timeout and torchrun environment, raw files for every loader) through the real loaders and
the plan path. The only allowed outcomes are a result with sane figures or the project's
own one-line error; `make fuzz` runs the same kinds at 10,000 each."""

import os

import pytest

from tests.fuzz.harness import ALLOWED, ERROR, HANG, INSANE, SANE, UNCAUGHT, classify
from tests.fuzz.kinds import KINDS, fuzz_kind

EXAMPLES = int(os.environ.get("ARCHIPELAGO_FUZZ_EXAMPLES", "200"))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_inputs_end_in_a_result_or_a_project_error(kind: str) -> None:
    counts, findings = fuzz_kind(kind, EXAMPLES, seed=14)
    assert not findings, "\n".join(findings)
    assert sum(counts.values()) > 0
    assert set(counts) <= ALLOWED


def test_the_harness_tells_every_outcome_apart() -> None:
    """Each outcome the fuzzer counts, produced on purpose, so the counts cannot all read
    'allowed' by construction."""
    from archipelago.errors import ArchipelagoError

    def loop() -> None:
        while True:
            pass

    def fail() -> None:
        raise ArchipelagoError("bad")

    assert classify(lambda: {"latency_s": 1.0})[0] == SANE
    assert classify(fail)[0] == ERROR
    assert classify(lambda: {}["missing"])[0] == UNCAUGHT
    assert classify(loop, hang_s=0.2)[0] == HANG
    assert classify(lambda: {"devices": [{"dsp": -3}]}) == (INSANE, ".devices[0].dsp = -3")
    assert classify(lambda: {"latency_s": float("nan")})[0] == INSANE
