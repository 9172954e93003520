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
from dataclasses import dataclass
from heapq import heappop, heappush

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


class IterativeReplica(Replica):
    """`continuous` (no budget: a whole prompt per iteration) and `chunked`. The decoding
    sequences are a heap of (the step count at which each ends, request), with the sum of
    their contexts: every step moves each one position on, so neither is walked per step."""

    def __init__(self, table: IterationTable, arrivals: np.ndarray, prompt: np.ndarray,
                 output: np.ndarray, out: Records, policy: Policy) -> None:
        super().__init__(table, arrivals, prompt, output, out, policy)
        self.ending: list[tuple[int, int]] = []  # (step count at its last token, request)
        self.steps = 0  # decode steps run so far
        self.ctx_sum = 0.0  # positions the decoding sequences feed next, summed
        self.prefilling: list[list[int]] = []  # [request, prompt tokens done]
        self.kv_used = 0

    def advance(self, until: float) -> None:
        while True:
            if not self.ending and not self.prefilling:
                if not self.queue:
                    return
                self.clock = max(self.clock, self.arrivals[self.queue[0]])
            if self.clock >= until:
                return
            self._admit()
            if self.prefilling:
                self._iteration()
            else:
                self._leap(until)

    def _admit(self) -> None:
        """First come, first served, while the batch and the KV cache have room."""
        room = self.policy.max_batch - len(self.ending) - len(self.prefilling)
        while self.queue and room and self.arrivals[self.queue[0]] <= self.clock:
            i = self.queue[0]
            need = int(self.prompt[i] + self.output[i])
            if self.kv_used + need > self.table.kv_tokens:
                return
            self.queue.popleft()
            self.kv_used += need
            self.out.start[i] = self.clock
            self._join(i)
            room -= 1

    def _join(self, i: int) -> None:
        """Request `i` admitted: its prompt is prefilled from the next iteration."""
        self.prefilling.append([i, 0])

    def _decode(self, i: int) -> None:
        """Request `i`'s first token out: it decodes the rest from the next step on."""
        heappush(self.ending, (self.steps + int(self.output[i]) - 1, i))
        self.ctx_sum += float(self.prompt[i] + 1)

    def _iteration(self) -> None:
        """One iteration: the decodes' step and the prompts' chunks."""
        decoding = len(self.ending)
        seconds = (float(self.table.decode(decoding, self.ctx_sum / decoding))
                   if decoding else 0.0)
        chunk = self.policy.budget
        budget = np.inf if chunk is None else chunk - decoding
        starts_prompt, done = False, []
        for entry in self.prefilling:
            if budget <= 0:
                break
            i, begun = entry
            end = int(min(self.prompt[i], begun + budget))
            budget -= end - begun
            seconds += float(self.table.prefill(1, end))
            if begun:
                seconds -= float(self.table.prefill(1, begun))
            starts_prompt |= begun == 0
            entry[1] = end
            if end == self.prompt[i]:
                done.append(i)
        if not decoding and not starts_prompt:
            seconds += float(self.table.prefill(1, 1))
        self.busy += seconds
        self.clock += seconds
        self.iterations += 1
        self._advance_decodes(1)
        self.prefilling = [e for e in self.prefilling if e[1] < self.prompt[e[0]]]
        for i in done:
            self.out.first[i] = self.clock
            if self.output[i] > 1:
                self._decode(i)
            else:
                self._finish([i])

    def _leap(self, until: float) -> None:
        """Decode steps alone until one sequence ends, or the next could admit a request."""
        decoding = len(self.ending)
        steps = self.ending[0][0] - self.steps
        mean = self.ctx_sum / decoding
        seconds = self.table.decode(decoding, mean + np.arange(steps))
        ends = self.clock + np.cumsum(seconds)
        bound = until
        if self.queue and self.arrivals[self.queue[0]] > self.clock:
            bound = min(until, self.arrivals[self.queue[0]])
        n = 1 + int(np.searchsorted(ends[:-1], bound, side="left"))
        self.busy += float(ends[n - 1]) - self.clock
        self.clock = float(ends[n - 1])
        self.iterations += n
        self._advance_decodes(n)

    def _advance_decodes(self, n: int) -> None:
        """`n` decode steps done: every decoding sequence n positions on, those at their
        last token finished."""
        if not self.ending:
            return
        self.steps += n
        self.ctx_sum += n * len(self.ending)
        ended = []
        while self.ending and self.ending[0][0] == self.steps:
            ended.append(heappop(self.ending)[1])
        if ended:
            self.ctx_sum -= float(sum(int(self.prompt[i] + self.output[i]) for i in ended))
            self._finish(ended)

    def _finish(self, ids: list[int]) -> None:
        self.out.finish[ids] = self.clock
        self.finishes += [self.clock] * len(ids)
        self.kv_used -= sum(int(self.prompt[i] + self.output[i]) for i in ids)


REPLICAS = {"static": StaticReplica, "continuous": IterativeReplica,
            "chunked": IterativeReplica}
