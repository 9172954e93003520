"""CHEF's schedule recurrence (strategies/chef/schedule.py) on a hand-computed diamond, and
the two ways M2A and the exact search call it (a suffix from a snapshot, one layer at a
time) against one call over the whole order."""

from itertools import product

from archipelago.strategies.chef.schedule import INF, run

# a -> (b, c) -> d on two accelerators; 1/64 s per byte between them, none within one
COST = [[1.0, 2.0], [3.0, 1.0], [2.0, 2.0], [1.0, 1.0]]
PREDS = [[], [(0, 64)], [(0, 64)], [(1, 32), (2, 32)]]
PER_BYTE = [[0.0, 1 / 64], [1 / 64, 0.0]]


def test_diamond_by_hand():
    start, comm, end = [0.0] * 4, [0.0] * 4, [0.0] * 4
    latest = run(COST, PREDS, PER_BYTE, [0, 1, 0, 0], range(4), [0.0, 0.0], end,
                 start=start, comm=comm)
    # a on 0: 0-1. b on 1: waits for a (1), receives 64 B (1 s), computes 1 s: 1-3.
    # c on 0: a is local, 1-3. d on 0: accelerator free and b, c done at 3; b's 32 B cross
    # (0.5 s), c's do not; computes 1 s: 3-4.5.
    assert start == [0.0, 1.0, 1.0, 3.0]
    assert comm == [0.0, 1.0, 0.0, 0.5]
    assert end == [1.0, 3.0, 3.0, 4.5]
    assert latest == 4.5


def test_stops_at_the_bound_and_on_a_layer_no_accelerator_runs():
    mapping = [0, 1, 0, 0]
    assert run(COST, PREDS, PER_BYTE, mapping, range(4), [0.0] * 2, [0.0] * 4, 3.0) == INF
    assert run(COST, PREDS, PER_BYTE, mapping, range(4), [0.0] * 2, [0.0] * 4, 4.6) == 4.5
    cannot = [[1.0, 2.0], [3.0, INF], [2.0, 2.0], [1.0, 1.0]]
    assert run(cannot, PREDS, PER_BYTE, mapping, range(4), [0.0] * 2, [0.0] * 4) == INF


def test_resuming_or_stepping_equals_one_pass():
    """Re-mapping resumes from layer k with the accelerators' free times before k; the exact
    search schedules one layer at a time: both must give the one-pass ends exactly."""
    for mapping in map(list, product(range(2), repeat=4)):
        full = [0.0] * 4
        latest = run(COST, PREDS, PER_BYTE, mapping, range(4), [0.0] * 2, full)
        free, end, ends = [0.0] * 2, [0.0] * 4, []
        for k in range(4):
            before, so_far = list(free), list(end)
            suffix = run(COST, PREDS, PER_BYTE, mapping, range(k, 4), before, so_far)
            assert max([*end[:k], suffix]) == latest and so_far == full
            ends.append(run(COST, PREDS, PER_BYTE, mapping, (k,), free, end))
        assert end == full and max(ends) == latest
