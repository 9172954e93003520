"""The check against transformers started early: the tokens ranks publish as they pick them,
and the reference's pass over the emulated path run as soon as the tokens it feeds are
known, giving the same report, to the bit, as the pass run after the ranks."""

from collections.abc import Callable

import pytest
import torch

from tests.test_emulate import GPT2, _reference_case, idle_for


def test_agreed_tokens_are_the_prefix_every_rank_has_alike(tmp_path) -> None:
    from archipelago.emulate.tokens import RankTokens

    launcher = RankTokens(tmp_path / "tokens", 3, capacity=4)
    ranks = [RankTokens(tmp_path / "tokens", 3) for _ in range(3)]  # each rank's own map
    assert launcher.agreed() == []
    for rank, row in enumerate([[5, 6, 7], [5, 6, 7, 8], [5, 6]]):
        for index, token in enumerate(row):
            ranks[rank].publish(rank, index, token)
    assert launcher.agreed() == [5, 6]  # rank 2 has not picked its third yet
    ranks[2].publish(2, 2, 9)  # a rank that disagrees ends the agreed prefix there
    assert launcher.agreed() == [5, 6]
    ranks[2].publish(2, 2, 7)
    assert launcher.agreed() == [5, 6, 7]


def published(tokens: list[int], after_polls: int = 0) -> Callable[[], tuple[list[int], bool]]:
    """A tokens() that shows none for `after_polls` looks (ranks still decoding), then
    `tokens`, the ranks not done."""
    polls = iter(range(after_polls))
    return lambda: ([], False) if next(polls, None) is not None else (tokens, False)


def test_pass_run_ahead_gives_the_report_the_late_pass_gives(gpt2_config, gpt2_reference,
                                                              tmp_path) -> None:
    """With the ranks' tokens published before they end, the reference's pass runs ahead
    over them; report_head then reports exactly (==, every float bit) what it reports when
    the pass runs after the ranks, a wrong logit included; published tokens that are not
    the final ones (a stale board) are not used, and ranks that end short of them leave
    the pass to report_head instead of waiting."""
    from archipelago.strategies.tensor_parallel.emulate.rank import (
        prepare_reference,
        report_head,
    )

    plan, job, prompt, expected = _reference_case(gpt2_config, gpt2_reference, tmp_path)
    with torch.inference_mode():
        along = gpt2_reference(torch.tensor([prompt + expected[:-1]])).logits[0, len(prompt) - 1:]
    logits = along.clone()
    logits[4, 3] += 0.125
    rank = {"tokens": expected, "vocab_slice": [0, GPT2["vocab_size"]], "logits": logits,
            "bytes_by_memory": {"hbm": 1}, "integer_checksum": 0}
    late = prepare_reference(plan, job, idle_for(0))
    ahead = prepare_reference(plan, job, idle_for(0), published(expected[:-1], 3))
    assert late.along is None and ahead.along is not None
    assert ahead.along[0] == expected[:-1]
    stale = [*expected[:2], (expected[2] + 1) % GPT2["vocab_size"], *expected[3:-1]]
    wrong = prepare_reference(plan, job, idle_for(0), published(stale))
    short = prepare_reference(plan, job, idle_for(0), lambda: (expected[:3], True))
    assert wrong.along is not None and short.along is None
    reports = [report_head(plan, job, [rank, rank], [rank], ref)
               for ref in (late, ahead, wrong, short)]
    assert reports[0]["tokens_match"] is True
    assert reports[0]["max_abs_logit_diff"] == pytest.approx(0.125, rel=1e-3)
    assert all(report == reports[0] for report in reports[1:])
