"""One replica of a plan serving requests under a scheduling policy, as a discrete-event
simulation: each iteration's time is the plan's own (estimate/iteration.py's table), so
the simulation is exact for a given seed and knows nothing of the plan's kind.

Policies (`POLICIES`):
  static      run-to-completion batches: up to `max_batch` waiting requests start together,
              their prompts padded to the longest and the batch decoding in lockstep until
              its longest output ends, before the next batch forms. What DFX (seeds/001:
              one sequence at a time, `max_batch` 1) and LORA (seeds/002: a fixed batch)
              run, and request-level batching as Orca (Yu et al., OSDI 2022, §2.2) names it.
  continuous  iteration-level batching (Orca, Yu et al., OSDI 2022; vLLM, Kwon et al., SOSP
              2023): a request joins the running batch at the next iteration, its whole
              prompt prefilled in that iteration beside the others' decode steps, and leaves
              as soon as its last token is out; up to `max_batch` requests, their KV cache
              (prompt + output tokens reserved when admitted, as Orca reserves) within what
              the plan's memory leaves free.
  chunked     chunked prefill (Sarathi-Serve, Agrawal et al., OSDI 2024): as continuous, but
              an iteration carries at most `chunk` tokens, the running decodes' first and
              the waiting prompts' chunks in the rest, so a long prompt no longer stalls
              the decodes for its whole prefill.

An iteration's time: the decode step of its B decoding sequences at their mean context
(a step's attention reads grow linearly with every sequence's context, so the mean stands
for the sum), plus each prompt chunk's share of a prefill, the batch-1 prefill at its end
less that at its start; an iteration of chunks alone that starts no prompt pays a pass's
fixed cost once more (a one-token prompt's). Between iterations that admit or finish
nothing, identical decode steps are advanced together (`_leap`), to the same times as one
at a time.
"""

from abc import ABC, abstractmethod
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

import numpy as np

from archipelago.estimate.iteration import IterationTable

POLICIES = ("static", "continuous", "chunked")


@dataclass
class Records:
    """Per request: when it was admitted (its queueing ends), its first token, its last."""

    start: np.ndarray
    first: np.ndarray
    finish: np.ndarray

    @classmethod
    def empty(cls, n: int) -> "Records":
        return cls(*(np.full(n, np.nan) for _ in range(3)))


@dataclass(frozen=True)
class Policy:
    name: str
    max_batch: int
    chunk: int = 512  # tokens per iteration, of `chunked` (Sarathi-Serve's smaller budget)
    micro_batches: int | None = None  # in flight through a plan's stages; None: one a stage

    @property
    def budget(self) -> int | None:
        """Tokens an iteration may carry: `chunk` under `chunked`, unbounded otherwise."""
        return self.chunk if self.name == "chunked" else None


class Replica(ABC):
    """The state every policy shares: its clock, queue, busy time and finish times."""

    def __init__(self, table: IterationTable, arrivals: np.ndarray, prompt: np.ndarray,
                 output: np.ndarray, out: Records, policy: Policy) -> None:
        self.table, self.arrivals, self.prompt, self.output = table, arrivals, prompt, output
        self.out, self.policy = out, policy
        self.clock = self.busy = 0.0
        self.iterations = 0  # a static batch's count as its prefill and decode steps
        self.queue: deque[int] = deque()
        self.assigned = 0
        self.finishes: list[float] = []  # in time order

    def assign(self, i: int) -> None:
        self.queue.append(i)
        self.assigned += 1

    def outstanding(self, t: float) -> int:
        """Requests assigned and not finished by `t`."""
        return self.assigned - bisect_right(self.finishes, t)

    @abstractmethod
    def advance(self, until: float) -> None:
        """Run every iteration that starts before `until`."""


class StaticReplica(Replica):
    def advance(self, until: float) -> None:
        arrivals, kv = self.arrivals, self.table.kv_tokens
        while self.queue:
            start = max(self.clock, arrivals[self.queue[0]])
            if start >= until:
                return
            batch: list[int] = []
            longest = most = 0
            while (self.queue and len(batch) < self.policy.max_batch
                   and arrivals[self.queue[0]] <= start):
                i = self.queue[0]
                grown = max(longest, self.prompt[i]), max(most, self.output[i])
                if batch and (len(batch) + 1) * sum(grown) > kv:
                    break
                batch.append(self.queue.popleft())
                longest, most = grown
            self._run(batch, start, int(longest), int(most))

    def _run(self, batch: list[int], start: float, longest: int, most: int) -> None:
        k = len(batch)
        first = start + float(self.table.prefill(k, longest))
        ends = first + np.cumsum(self.table.decode(k, longest + np.arange(1, most)))
        for i in batch:
            self.out.start[i], self.out.first[i] = start, first
            self.out.finish[i] = first if self.output[i] == 1 else ends[self.output[i] - 2]
        end = float(ends[-1]) if most > 1 else first
        self.iterations += most
        self.finishes += sorted(self.out.finish[batch].tolist())
        self.busy += end - start
        self.clock = end


@dataclass
class Iteration:
    """What one iteration of continuous batching runs: the step of `decoding` sequences at
    mean context `mean`, prompt chunks as (tokens done before, after), whether one starts a
    prompt, and the requests whose prompt it completes."""

    decoding: int
    mean: float
    chunks: list[tuple[int, int]]
    starts_prompt: bool
    done: list[int]

    def seconds(self, table: IterationTable) -> float:
        return self.cost(lambda b, c: float(table.decode(b, c)),
                         lambda b, c: float(table.prefill(b, c)), 0.0)

    def cost(self, decode: Callable[[int, float], Any], prefill: Callable[[int, float], Any],
             zero: Any) -> Any:
        """Its time from a table's `decode` and `prefill` (seconds, or every stage's at
        once): the decode step, each chunk's share of a batch-1 prefill, and a pass's fixed
        cost once more for chunks alone that start no prompt."""
        seconds = decode(self.decoding, self.mean) if self.decoding else zero
        for begun, end in self.chunks:
            seconds = seconds + prefill(1, end)
            if begun:
                seconds = seconds - prefill(1, begun)
        if not self.decoding and not self.starts_prompt:
            seconds = seconds + prefill(1, 1)
        return seconds


class Running:
    """One scheduler's admitted requests. The decoding sequences are a heap of (the step
    count at which each ends, request), with the sum of their contexts: every step moves
    each one position on, so neither is walked per step."""

    def __init__(self) -> None:
        self.ending: list[tuple[int, int]] = []  # (step count at its last token, request)
        self.steps = 0  # decode steps run so far
        self.ctx_sum = 0.0  # positions the decoding sequences feed next, summed
        self.prefilling: list[list[int]] = []  # [request, prompt tokens done]

    def __len__(self) -> int:
        return len(self.ending) + len(self.prefilling)

    def compose(self, prompt: np.ndarray, budget: int | None) -> Iteration:
        """The next iteration: every decode's step, then the prompts' chunks within the
        token budget (less the decodes' tokens); the chunks' progress is recorded."""
        decoding = len(self.ending)
        room = np.inf if budget is None else budget - decoding
        chunks, starts, done = [], False, []
        for entry in self.prefilling:
            if room <= 0:
                break
            i, begun = entry
            end = int(min(prompt[i], begun + room))
            room -= end - begun
            chunks.append((begun, end))
            starts |= begun == 0
            entry[1] = end
            if end == prompt[i]:
                done.append(i)
        self.prefilling = [e for e in self.prefilling if e[1] < prompt[e[0]]]
        mean = self.ctx_sum / decoding if decoding else 0.0
        return Iteration(decoding, mean, chunks, starts, done)

    def advance(self, n: int, length: np.ndarray) -> list[int]:
        """`n` decode steps done: every decoding sequence n positions on; those at their
        last token (`length`: each request's prompt + output) leave, and are returned."""
        if not self.ending:
            return []
        self.steps += n
        self.ctx_sum += n * len(self.ending)
        ended = []
        while self.ending and self.ending[0][0] == self.steps:
            ended.append(heappop(self.ending)[1])
        if ended:
            self.ctx_sum -= float(sum(int(length[i]) for i in ended))
        return ended

    def decode(self, i: int, prompt: int, output: int) -> None:
        """Request `i`'s first token is out: it decodes its `output - 1` others."""
        heappush(self.ending, (self.steps + output - 1, i))
        self.ctx_sum += float(prompt + 1)


class Iterative(Replica):
    """What `continuous` and `chunked` share, over one `Running` or several (a pipeline's
    micro-batches, pipeline.py): admission within the batch and the KV cache, and an
    iteration's end."""

    def __init__(self, table: IterationTable, arrivals: np.ndarray, prompt: np.ndarray,
                 output: np.ndarray, out: Records, policy: Policy) -> None:
        super().__init__(table, arrivals, prompt, output, out, policy)
        self.length = prompt + output
        self.kv_used = 0

    def _admit(self, running: Running, queue: deque[int]) -> None:
        """First come, first served from `queue`, while the batch and the KV cache have
        room."""
        room = self.policy.max_batch - len(running)
        while queue and room and self.arrivals[queue[0]] <= self.clock:
            i = queue[0]
            need = int(self.prompt[i] + self.output[i])
            if self.kv_used + need > self.table.kv_tokens:
                return
            queue.popleft()
            self.kv_used += need
            self.out.start[i] = self.clock
            self._join(running, i)
            room -= 1

    def _join(self, running: Running, i: int) -> None:
        """Request `i` admitted: its prompt is prefilled from the next iteration."""
        running.prefilling.append([i, 0])

    def _exit(self, running: Running, it: Iteration) -> None:
        """`it` ends at the clock: the decodes one step on, its finished prompts' first
        tokens out."""
        ended = running.advance(1, self.length)
        if ended:
            self._finish(ended)
        for i in it.done:
            self.out.first[i] = self.clock
            if self.output[i] > 1:
                running.decode(i, int(self.prompt[i]), int(self.output[i]))
            else:
                self._finish([i])

    def _finish(self, ids: list[int]) -> None:
        self.out.finish[ids] = self.clock
        self.finishes += [self.clock] * len(ids)
        self.kv_used -= sum(int(self.prompt[i] + self.output[i]) for i in ids)


class IterativeReplica(Iterative):
    """`continuous` (no budget: a whole prompt per iteration) and `chunked`, one batch."""

    def __init__(self, table: IterationTable, arrivals: np.ndarray, prompt: np.ndarray,
                 output: np.ndarray, out: Records, policy: Policy) -> None:
        super().__init__(table, arrivals, prompt, output, out, policy)
        self.running = Running()

    def advance(self, until: float) -> None:
        running = self.running
        while True:
            if not running.ending and not running.prefilling:
                if not self.queue:
                    return
                self.clock = max(self.clock, self.arrivals[self.queue[0]])
            if self.clock >= until:
                return
            self._admit(running, self.queue)
            if running.prefilling:
                self._iteration()
            else:
                self._leap(until)

    def _iteration(self) -> None:
        """One iteration: the decodes' step and the prompts' chunks."""
        it = self.running.compose(self.prompt, self.policy.budget)
        seconds = it.seconds(self.table)
        self.busy += seconds
        self.clock += seconds
        self.iterations += 1
        self._exit(self.running, it)

    def _leap(self, until: float) -> None:
        """Decode steps alone until one sequence ends, or the next could admit a request."""
        running = self.running
        decoding = len(running.ending)
        steps = running.ending[0][0] - running.steps
        mean = running.ctx_sum / decoding
        seconds = self.table.decode(decoding, mean + np.arange(steps))
        ends = self.clock + np.cumsum(seconds)
        bound = until
        if self.queue and self.arrivals[self.queue[0]] > self.clock:
            bound = min(until, self.arrivals[self.queue[0]])
        n = 1 + int(np.searchsorted(ends[:-1], bound, side="left"))
        self.busy += float(ends[n - 1]) - self.clock
        self.clock = float(ends[n - 1])
        self.iterations += n
        ended = running.advance(n, self.length)
        if ended:
            self._finish(ended)


REPLICAS = {"static": StaticReplica, "continuous": IterativeReplica,
            "chunked": IterativeReplica}
