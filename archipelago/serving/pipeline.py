"""A replica of a plan of S pipeline stages keeping M micro-batches in flight, each stage
working on one micro-batch while the next stage works on another, under `continuous` or
`chunked` batching.

The schedule is the synchronous one of pipelined inference: time advances in steps, and at
step t stage s works on the micro-batch that entered the first stage at step t - s
(DeepSpeed's `InferenceSchedule`, deepspeed/runtime/pipe/schedule.py: `micro_batch_id =
step_id - stage_id`; GPipe's time steps, Huang et al., NeurIPS 2019, Fig. 2c). A step
lasts as long as its slowest busy stage, each stage's time from that stage's own table
(its share of the plan's estimate and its hand-off to the next stage:
`IterationTable.stages`). Micro-batch m may enter at the steps t = m (mod max(M, S)), so
it re-enters only after leaving the last stage: a request's next token is scheduled once
its micro-batch's previous iteration is out, which is what makes generation's feedback
loop wait (DeepSpeed-Inference, Aminabadi et al., SC 2022, §IV-B, keeps as many
micro-batches as stages in flight for that reason). With stages of equal time t, M
micro-batches run min(M, S) iterations every S steps: min(M, S) / (S t) a second; one
micro-batch runs the stages in turn, as `archi plan` costs the plan.

Each micro-batch is a continuous-batching scheduler of its own, as vLLM's pipeline runs
one scheduler per micro-batch (its "virtual engines"): a request, at the first step that
starts once it has arrived (vLLM's asynchronous engine, too, takes new requests between
steps), joins the queue of the micro-batch with the fewest requests unfinished (ties to
the lowest index; vllm/engine/llm_engine.py, "Add the sequence group to the scheduler
with least unfinished seqs"), which admits it first come first served at its turn while it has room
(`max_batch` each) and the KV cache holds it (one pool: every stage caches its own layers
of every sequence). Steps in which no micro-batch admits a request, starts a prompt or
finishes a sequence are advanced together (`_leap`), to the same times as one at a time.
"""

from bisect import bisect_right
from collections import deque

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.estimate.iteration import IterationTable
from archipelago.serving.replica import (
    REPLICAS,
    Iteration,
    Iterative,
    Policy,
    Records,
    Replica,
    Running,
)

MAX_MICRO_BATCHES = 256  # in flight through one replica's stages: past any pipeline's depth


class PipelineReplica(Iterative):
    def __init__(self, table: IterationTable, arrivals: np.ndarray, prompt: np.ndarray,
                 output: np.ndarray, out: Records, policy: Policy) -> None:
        super().__init__(table, arrivals, prompt, output, out, policy)
        self.stages = table.stages
        m = policy.micro_batches or len(self.stages)
        self.lanes = [Running() for _ in range(m)]
        self.waiting: list[deque[int]] = [deque() for _ in range(m)]  # each lane's queue
        self.period = max(m, len(self.stages))  # steps between one micro-batch's turns
        self.step = 0  # the next step's index; it starts at self.clock
        self.entered: list[int | None] = [None] * m  # the step its iteration in flight entered
        self.flight: list[list[float]] = [[] for _ in range(m)]  # its seconds at each stage
        self.pending: list[Iteration | None] = [None] * m
        self.positions = table.contexts + 1.0  # a decode step's grid, as the tables'
        self.grids = (table.contexts.tolist(), self.positions.tolist())  # prefill's, decode's
        self.stacked: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # batch -> stages x grid
        self.steps = np.zeros((len(self.stages), table.max_batch + 1, len(self.positions)))

    def advance(self, until: float) -> None:
        while True:
            if (not any(self.lanes) and not any(self.waiting)
                    and all(e is None for e in self.entered)):
                if not self.queue:
                    return
                self.clock = max(self.clock, self.arrivals[self.queue[0]])
            if self.clock >= until:
                return
            if self._quiet():
                self._leap(until)
            else:
                self._step()

    def _step(self) -> None:
        """One step: the micro-batch whose turn it is enters (admitting what it can), every
        stage works on its micro-batch, the one at the last stage leaves."""
        m, last = self.step % self.period, len(self.stages) - 1
        self._distribute()
        if m < len(self.lanes) and self.entered[m] is None:
            lane = self.lanes[m]
            self._admit(lane, self.waiting[m])
            if lane:
                it = lane.compose(self.prompt, self.policy.budget)
                self.pending[m], self.entered[m] = it, self.step
                self.flight[m] = it.cost(self._decode_one, self._prefill_one, 0.0).tolist()
                self.iterations += 1
        longest = work = 0.0
        for q, e in enumerate(self.entered):
            if e is not None:
                seconds = self.flight[q][self.step - e]
                longest, work = max(longest, seconds), work + seconds
        self.clock += longest
        self.busy += work / len(self.stages)
        for q, e in enumerate(self.entered):
            if e is not None and self.step - e == last:
                it = self.pending[q]
                assert it is not None  # set with `entered`
                self.entered[q], self.pending[q] = None, None
                self._exit(self.lanes[q], it)
        self.step += 1

    def _distribute(self) -> None:
        """Requests arrived by the step's start to the micro-batches' queues, each to the one
        with the fewest unfinished then."""
        while self.queue and self.arrivals[self.queue[0]] <= self.clock:
            q = min(range(len(self.lanes)), key=self._unfinished)
            self.waiting[q].append(self.queue.popleft())

    def _unfinished(self, q: int) -> int:
        """Micro-batch q's requests: waiting, running, and those whose prompt its iteration
        in flight completes."""
        it = self.pending[q]
        return len(self.lanes[q]) + len(self.waiting[q]) + (len(it.done) if it else 0)

    def _quiet(self) -> bool:
        """Whether the steps ahead are decode steps alone until a sequence ends or a request
        arrives: no prompt in flight, and no waiting request that its micro-batch could
        admit."""
        if self.queue and self.arrivals[self.queue[0]] <= self.clock:
            return False
        if not any(lane.ending for lane in self.lanes):
            return False
        for lane, it, queue in zip(self.lanes, self.pending, self.waiting, strict=True):
            if lane.prefilling or (it is not None and it.chunks):
                return False
            if (queue and len(lane) < self.policy.max_batch
                    and self.kv_used + int(self.length[queue[0]]) <= self.table.kv_tokens):
                return False
        return True

    def _leap(self, until: float) -> None:
        """Decode steps alone, every micro-batch's at once, until one sequence ends or a
        step would start at the next arrival (or `until`)."""
        s, period, now = len(self.stages), self.period, self.step
        runs = []  # (lane, first entry step, batch, mean context at that entry)
        last = None  # the step at whose end the first sequence ends
        for q, lane in enumerate(self.lanes):
            if not lane.ending:
                continue
            e = self.entered[q]
            first = e if e is not None else now + (q - now) % period
            ends_at = first + (lane.ending[0][0] - lane.steps - 1) * period + s - 1
            last = ends_at if last is None else min(last, ends_at)
            runs.append((q, first, len(lane.ending), lane.ctx_sum / len(lane.ending)))
        assert last is not None  # _quiet: some micro-batch decodes
        n = last - now + 1
        counts = [max(0, (last - first) // period + 1) for _, first, _, _ in runs]
        starts = np.cumsum([0, *counts])  # each run's first column in `at`
        which = np.repeat(np.arange(len(runs)), counts)
        table = np.array([(batch, mean) for _, _, batch, mean in runs])[which]
        at = self._decode(table[:, 0].astype(int),
                          table[:, 1] + np.arange(starts[-1]) - starts[:-1][which])
        # lane q's iteration entering at step P r + q at each stage, from round r0 (the first
        # whose iteration can still be in flight), read back as every stage's steps
        r0 = (now - s + 1) // period
        rounds = np.zeros((s, (last - period * r0) // period + 1, period))
        for (q, first, _, _), count, start in zip(runs, counts, starts.tolist()[:-1],
                                                  strict=True):
            r = (first - q) // period - r0
            rounds[:, r:r + count, q] = at[:, start:start + count]
        flat, off = rounds.reshape(s, -1), now - period * r0
        seconds = np.stack([flat[k, off - k:off - k + n] for k in range(s)])
        ends = self.clock + np.cumsum(seconds.max(axis=0))
        bound = until
        if self.queue and self.arrivals[self.queue[0]] > self.clock:
            bound = min(until, self.arrivals[self.queue[0]])
        ran = 1 + int(np.searchsorted(ends[:-1], bound, side="left"))
        self.busy += float(seconds[:, :ran].sum()) / s
        self.clock = float(ends[ran - 1])
        end = now + ran - 1  # the last step run
        self.step = end + 1
        for (q, first, batch, mean), row in zip(runs, starts.tolist()[:-1], strict=True):
            if first > end:
                continue
            entries = (end - first) // period + 1
            self.iterations += entries - int(first < now)
            out = (end - first - s + 1) // period + 1 if end >= first + s - 1 else 0
            ended = self.lanes[q].advance(out, self.length)
            if ended:
                self._finish(ended)  # only at `last`, the step that ended: self.clock
            if out < entries:  # its latest iteration is still in flight
                latest = entries - 1
                self.entered[q] = first + latest * period
                self.flight[q] = at[:, row + latest].tolist()
                self.pending[q] = Iteration(batch, mean + latest, [], False, [])
            else:
                self.entered[q], self.pending[q] = None, None

    def _rows(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Every stage's prefill and decode seconds at `batch` (stages x grid), kept, the
        decode rows also in `steps` (stages x batch x grid) for `_decode`."""
        rows = self.stacked.get(batch)
        if rows is None:
            prefill, decode = (np.stack([stage.row(batch)[k] for stage in self.stages])
                               for k in (0, 1))
            rows = self.stacked[batch] = (prefill, decode)
            self.steps[:, batch] = decode
        return rows

    def _one(self, kind: int, batch: int, x: float) -> np.ndarray:
        """Every stage's prefill (`kind` 0) or decode step (1) at one point, interpolated
        as the tables interpolate."""
        xp, rows = self.grids[kind], self._rows(batch)[kind]
        x = min(max(x, xp[0]), xp[-1])
        j = min(bisect_right(xp, x) - 1, len(xp) - 2)
        w = (x - xp[j]) / (xp[j + 1] - xp[j])
        return rows[:, j] + w * (rows[:, j + 1] - rows[:, j])

    def _prefill_one(self, batch: int, tokens: float) -> np.ndarray:
        return self._one(0, batch, tokens)

    def _decode_one(self, batch: int, context: float) -> np.ndarray:
        return self._one(1, batch, context)

    def _decode(self, batches: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """Every stage's decode step of batches[r] sequences at contexts[r] (stages x r):
        the stage tables' interpolation, once for all stages."""
        for b in set(batches.tolist()) - self.stacked.keys():
            self._rows(b)
        xp = self.positions
        x = np.clip(contexts, xp[0], xp[-1])
        j = np.minimum(np.searchsorted(xp, x, side="right") - 1, len(xp) - 2)
        w = (x - xp[j]) / (xp[j + 1] - xp[j])
        lo = self.steps[:, batches, j]
        return lo + w * (self.steps[:, batches, j + 1] - lo)


def check_micro_batches(policy: Policy) -> None:
    """`micro_batches` within bounds, and only under a policy that pipelines."""
    m = policy.micro_batches
    if m is None:
        return
    if not 1 <= m <= MAX_MICRO_BATCHES:
        raise ArchipelagoError(f"--micro-batches {m}: must be in 1..{MAX_MICRO_BATCHES}")
    if policy.name not in PIPELINES:
        raise ArchipelagoError(f"--micro-batches: the {policy.name} policy runs its batches "
                               f"through the stages in turn; micro-batches fly under "
                               f"{', '.join(PIPELINES)}")


def replica_kind(table: IterationTable, policy: Policy) -> type[Replica]:
    """The replica that serves `table` under `policy`: micro-batches in flight through a
    plan of several stages under a policy that pipelines, else the policy's own."""
    if len(table.stages) > 1:
        return PIPELINES.get(policy.name, REPLICAS[policy.name])
    return REPLICAS[policy.name]


PIPELINES: dict[str, type[Replica]] = {"continuous": PipelineReplica,
                                       "chunked": PipelineReplica}
