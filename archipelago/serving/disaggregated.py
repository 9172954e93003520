"""Prefill and decode on separate pools (disaggregated serving): the policy of DistServe
(Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large
Language Model Serving", OSDI 2024), whose prefill instances compute a request's prompt
and first token and whose decode instances, after the KV cache is moved to them, generate
the rest; Splitwise (Patel et al., "Splitwise: Efficient Generative LLM Inference Using
Phase Splitting", ISCA 2024) runs the two phases on different hardware (H100 prompt
machines, A100 token machines), as GPU prefill beside FPGA decode does here.

A request is prefilled on the prefill pool: its own plan's table, prefill-only iterations
(the pool runs the chosen policy with every request's output taken as the one token its
prefill produces, so the first token comes from there, and its cache is released then:
the copy being sent is not counted against the prefill pool's memory). Its prompt's keys
and values then cross the link of the prefill replica that served it, whole, after the
prefill, as DistServe moves them: one transfer at a time per link, the first prefilled
first, each `Link.transfer_s` (latency + bytes / bandwidth). It then joins the decode
pool's continuous batching (decode-only iterations; its prompt and output reserved in the
decode pool's KV cache when admitted, which bounds admission as in replica.py), whose
micro-batches fly through the stages of a decode plan split `pp` > 1 as pipeline.py
schedules them. A one-token answer ends on the prefill pool and moves nothing.

TTFT is the queueing and prefill on the prefill pool; TPOT (metrics.py: finish less first
token, over the tokens after it) counts the transfer and the wait for the decode pool."""

from dataclasses import dataclass

import numpy as np

from archipelago.estimate.iteration import IterationTable
from archipelago.hardware.link import Link
from archipelago.models.graph import build_graph
from archipelago.models.spec import ModelSpec
from archipelago.serving.pipeline import PipelineReplica, replica_kind
from archipelago.serving.replica import (
    IterativeReplica,
    Policy,
    Records,
    Replica,
    Running,
)
from archipelago.serving.requests import Requests
from archipelago.serving.simulate import Outcome, check, serve_pool


class DecodeOnly:
    """Decodes alone: a request arrives with its prompt cached and its first token out, so
    it decodes from its next iteration; nothing is prefilled here."""

    prompt: np.ndarray
    output: np.ndarray

    def _join(self, running: Running, i: int) -> None:
        running.decode(i, int(self.prompt[i]), int(self.output[i]))


class DecodeReplica(DecodeOnly, IterativeReplica):
    """A decode pool's replica of one stage: continuous batching of decodes."""


class PipelineDecodeReplica(DecodeOnly, PipelineReplica):
    """A decode pool's replica of several stages (a rack split `pp` > 1): micro-batches of
    decodes in flight through them, as pipeline.py schedules a colocated rack's."""


def decode_replica(table: IterationTable) -> type[Replica]:
    """The decode pool's replica: pipelined over a plan of several stages."""
    return PipelineDecodeReplica if len(table.stages) > 1 else DecodeReplica


def decode_policy(policy: Policy) -> Policy:
    """The decode pool's policy whatever the prefill pool's: continuous batching up to
    `policy.max_batch`, its micro-batches in flight through a staged plan."""
    return Policy("continuous", policy.max_batch, micro_batches=policy.micro_batches)


def kv_bytes(spec: ModelSpec, tokens: np.ndarray, value_bytes: float) -> np.ndarray:
    """Keys and values of every layer for each prompt of `tokens` tokens, at `value_bytes`
    a value: the model graph's own count (models/graph.py), sliding windows kept short."""
    return np.asarray(build_graph(spec).kv_cache_bytes(tokens, value_bytes), dtype=float)


@dataclass(frozen=True)
class Disaggregated(Outcome):
    """An outcome whose `busy_s` lists the prefill replicas' then the decode replicas';
    per request the seconds its cache spent on the link (NaN: nothing moved) and the
    bytes moved; each prefill replica's link's busy seconds."""

    prefill_replicas: int
    transfer_s: np.ndarray
    moved_bytes: np.ndarray
    link_busy_s: np.ndarray


def transfers(ready: np.ndarray, served: np.ndarray, nbytes: np.ndarray, link: Link,
              links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """When each cache has crossed its link (NaN where `nbytes` is 0: nothing sent), the
    seconds each spent on it, and each link's busy seconds: a link sends one cache at a
    time, in the order their prefills ended (ties by request)."""
    done = np.full(len(ready), np.nan)
    seconds = np.full(len(ready), np.nan)
    free, busy = np.zeros(links), np.zeros(links)
    for i in np.argsort(ready, kind="stable"):
        if nbytes[i] == 0:
            continue
        r = served[i]
        seconds[i] = link.transfer_s(float(nbytes[i]))
        done[i] = free[r] = max(ready[i], free[r]) + seconds[i]
        busy[r] += seconds[i]
    return done, seconds, busy


def simulate_disaggregated(prefill: IterationTable, decode: IterationTable,
                           requests: Requests, rate: float, policy: Policy, link: Link,
                           bytes_per_request: np.ndarray, prefill_replicas: int = 1,
                           decode_replicas: int = 1, router: str = "round-robin"
                           ) -> Disaggregated:
    """Serve `requests` arriving at `rate` per second: prefilled on `prefill_replicas`
    copies of the prefill plan under `policy`, each request's cache of
    `bytes_per_request` moved over `link`, decoded on `decode_replicas` copies of the
    decode plan batching continuously (up to `policy.max_batch`; `policy.micro_batches`
    in flight through a decode plan of several stages), one router for both."""
    decoding = decode_policy(policy)
    check(decode, requests, decoding, decode_replicas, router)
    prompts = Requests(requests.unit_arrivals, requests.prompt, np.ones_like(requests.output))
    check(prefill, prompts, policy, prefill_replicas, router)
    first, served = serve_pool(replica_kind(prefill, policy), prefill, prompts.at(rate),
                               prompts.prompt, prompts.output, policy, prefill_replicas,
                               router)
    moved = requests.output > 1
    ready, seconds, link_busy = transfers(first.records.finish, served,
                                          np.where(moved, bytes_per_request, 0.0), link,
                                          prefill_replicas)
    second, _ = serve_pool(decode_replica(decode), decode, ready[moved], requests.prompt[moved],
                           requests.output[moved], decoding, decode_replicas, router)
    finish = first.records.finish.copy()
    finish[moved] = second.records.finish
    records = Records(first.records.start, first.records.first, finish)
    return Disaggregated(first.arrivals, requests.output, records,
                         np.concatenate([first.busy_s, second.busy_s]),
                         first.iterations + second.iterations, prefill_replicas, seconds,
                         np.where(moved, bytes_per_request, 0.0), link_busy)
