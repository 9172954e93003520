"""The pruned `--split auto` search (split_choice.py) chooses what the search that tried
every degree with every stage count chose: the split, the refused degrees and the estimate
recorded from the commit before it pruned (benchmarks/record_auto_splits.py wrote
tests/data/auto_splits.json), for every built-in decoder and published config in tests/data,
with lora-q, lora-f and dfx, on 8 to 256 boards."""

import json

import pytest

from benchmarks.record_auto_splits import FIXTURE, cases, choice, key


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict]:
    return json.loads(FIXTURE.read_text())


def test_every_case_was_recorded(recorded: dict[str, dict]) -> None:
    assert sorted(recorded) == sorted(key(*case) for case in cases())
    # the record covers what the pruning skips: degrees refused at every stage count,
    # stage counts tried before one fits, and racks where nothing fits
    chosen = [c for c in recorded.values() if "tp" in c]
    assert any(c["refused_tp"] for c in chosen)
    assert max(c["pp"] for c in chosen) >= 16
    assert any(c["reasons"] for c in chosen)


def test_auto_split_is_today_s_choice(recorded: dict[str, dict]) -> None:
    differ = [key(*case) for case in cases() if choice(*case) != recorded[key(*case)]]
    assert not differ, f"{len(differ)} choices changed, first: {differ[:3]}"
