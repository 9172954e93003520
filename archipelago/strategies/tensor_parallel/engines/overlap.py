"""How much of a collective's time shows on the critical path.

Three cases, named by CommStep.overlap:
- `none`: compute stalls for the whole collective (DFX, seeds/001 §IV-C).
- `matmul_blocks`: the consuming matmuls traverse the gathered input column-major, local
  block first (seeds/002 Eq. 4, 9): with N blocks of compute T_b and ring steps T_s, the
  matmuls end at max(N T_b, (N-1) T_s + T_b), so (N-1) max(0, T_s - T_b) is exposed; an
  early broadcast takes off the producer's time after its first head.
- `row_groups`: LayerNorm partial sums leave in groups of d packed rows (Eq. 3): with G
  groups of compute T_g and a per-group all-reduce K, the last sum lands at
  T_g + (G-1) max(T_g, K) + K, so K + (G-1) max(0, K - T_g) is exposed.
"""

import numpy as np

from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan, Step


def collective_seconds(plan: Plan, step: CommStep, rows: int) -> float:
    """The whole collective for `rows` rows, as the engine's own router runs it."""
    return plan.engine.collective_seconds(step, rows, plan.cluster)


def consumers(steps: list[Step], index: int) -> list[int]:
    """The steps after collective `steps[index]` (up to the next collective) that read its
    tensor: the matmuls a `matmul_blocks` gather hides behind."""
    tensor, out = steps[index].tensor, []
    for later in range(index + 1, len(steps)):
        step = steps[later]
        if isinstance(step, CommStep):
            break
        if tensor in step.op.inputs:
            out.append(later)
    return out


def _consumers_seconds(steps: list[Step], index: int, compute: list[np.ndarray]) -> np.ndarray:
    """Compute time of the steps that read the gathered tensor (`consumers`)."""
    total = np.zeros(compute[index].shape)
    for later in consumers(steps, index):
        total = total + compute[later]
    return total


def _early_start_seconds(steps: list[Step], index: int, compute: list[np.ndarray]) -> np.ndarray:
    """How much earlier an early-broadcast collective starts: the producer's compute after
    its first head is done (seeds/002 §III-B, third method); zero otherwise."""
    step = steps[index]
    producer = steps[index - 1] if index else None
    if not (step.early and isinstance(producer, ComputeStep)
            and producer.op.name == step.tensor and producer.local_heads > 1):
        return np.zeros(compute[index].shape)
    return compute[index - 1] * (1 - 1 / producer.local_heads)


def exposed_seconds(plan: Plan, steps: list[Step], index: int, rows: int,
                    compute: list[np.ndarray]) -> np.ndarray:
    """Critical-path seconds of collective `steps[index]`; `compute` holds every compute
    step's seconds (zeros at collectives)."""
    step = steps[index]
    assert isinstance(step, CommStep)
    ranks = plan.ranks
    if ranks == 1:
        return np.zeros(compute[index].shape)
    if step.overlap == "matmul_blocks":
        step_s = collective_seconds(plan, step, rows) / (ranks - 1)
        block_s = _consumers_seconds(steps, index, compute) / ranks
        exposed = (ranks - 1) * np.maximum(0.0, step_s - block_s)
        return np.maximum(0.0, exposed - _early_start_seconds(steps, index, compute))
    if step.overlap == "row_groups":
        assert index > 0 and isinstance(steps[index - 1], ComputeStep)
        groups = -(-rows // step.group_rows)
        group_s = compute[index - 1] / groups
        k = collective_seconds(plan, step, min(rows, step.group_rows))
        return k + (groups - 1) * np.maximum(0.0, k - group_s)
    return np.zeros(compute[index].shape) + collective_seconds(plan, step, rows)
