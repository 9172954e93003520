"""Emulate a scheduled DAG: one OS process per FPGA, each creating only the weights of the
layers mapped to it, running its layers in schedule order, and sending a layer's output to
another FPGA only when a layer there reads it (seeds/004 §VII-B's end-to-end run, in
software). The outputs are compared with the unsplit DAG on the same weights and inputs.

The emulator takes plain data (the DAG, layer -> FPGA, the schedule order), not a plan
object, so it does not depend on the strategy that made the schedule.
"""

import multiprocessing as mp
import os
import queue
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from archipelago.emulate.errors import RankFailure, one_line
from archipelago.emulate.watchdog import FAULT_ENV, Fault
from archipelago.models.dag import ModelDAG, validate_dag
from archipelago.strategies.chef.emulate.dag_torch import (
    layer_weights,
    model_inputs,
    run_dag,
    run_layer,
    sinks,
)
from archipelago.strategies.chef.emulate.elementwise import check_ops


@dataclass(frozen=True)
class Given:
    """Weights and inputs to use instead of seeded ones (an imported module's own). A
    forked process reads only the entries of its own layers."""

    weights: dict[str, list[torch.Tensor]] | None = None
    inputs: dict[str, torch.Tensor] | None = None


def _weights(dag: ModelDAG, name: str, seed: int, given: Given) -> list[torch.Tensor]:
    if given.weights is not None:
        return given.weights.get(name, [])
    return layer_weights(dag, name, seed)


POLL_S = 0.05  # how often the launcher looks for a rank that died without a word

# Tensors travel between processes as numpy arrays: pickled by value, so a receiver never
# depends on the sender's shared-memory handles outliving it (torch's own reductions do).


@dataclass(frozen=True)
class Work:
    """What the FPGA processes run, as plain data: layer -> FPGA, the schedule order, the
    values each layer receives from other layers (`reads`), the values it computes that
    other layers or the caller read (`writes`), and the values the run returns."""

    placement: dict[str, int]
    order: list[str]
    reads: dict[str, tuple[str, ...]]
    writes: dict[str, tuple[str, ...]]
    finals: tuple[str, ...]

    @cached_property
    def readers(self) -> dict[str, set[int]]:
        """Value -> the FPGAs whose layers read it."""
        out: dict[str, set[int]] = {}
        for layer, values in self.reads.items():
            for value in values:
                out.setdefault(value, set()).add(self.placement[layer])
        return out

    @cached_property
    def producer(self) -> dict[str, int]:
        """Value -> the FPGA that computes it."""
        return {value: self.placement[layer] for layer, values in self.writes.items()
                for value in values}


# Called in an FPGA process with its layers: creates what they need (their weights only)
# and returns the function that runs one layer on the values at hand, returning the values
# it computes by name.
LayerRunner = Callable[[str, dict[str, torch.Tensor]], dict[str, torch.Tensor]]
MakeRunner = Callable[[list[str]], LayerRunner]


def _fpga_process(rank: int, work: Work, make_runner: MakeRunner, inboxes: list, results,
                  timeout_s: float, fault: str | None) -> None:
    torch.set_num_threads(1)
    injected = Fault.parse(fault, rank)  # tests: fail before this rank's Nth layer
    mine = [n for n in work.order if work.placement[n] == rank]
    values: dict[str, torch.Tensor] = {}
    sent: Counter = Counter()
    name = "(weights)"
    try:
        run = make_runner(mine)
        with torch.no_grad():
            for count, name in enumerate(mine, 1):
                if injected is not None and count == injected.at:
                    injected.strike()
                for need in work.reads[name]:
                    while need not in values:
                        src, array = inboxes[rank].get(timeout=timeout_s)
                        values[src] = torch.from_numpy(array)
                computed = run(name, values)
                values.update(computed)
                for value in work.writes[name]:
                    for dst in sorted(work.readers.get(value, set()) - {rank}):
                        inboxes[dst].put((value, computed[value].numpy()))
                        sent[dst] += computed[value].numel() * computed[value].element_size()
    except queue.Empty:
        results.put((rank, None, f"waited {timeout_s} s for an input that never came"))
        return
    except Exception as err:  # the rank's own failure: its one line, never a traceback
        results.put((rank, None, f"layer '{name}': {one_line(err)}"))
        return
    outputs = {v: values[v].numpy() for v in work.finals if work.producer[v] == rank}
    results.put((rank, {"outputs": outputs, "sent": dict(sent), "weight_layers": sorted(mine)},
                 None))


def run_processes(work: Work, make_runner: MakeRunner, fpga_names: list[str],
                  timeout_s: float) -> dict[int, dict]:
    """One forked process per FPGA running `work`; every rank's report (its final values,
    bytes sent to each other rank, its layers)."""
    ctx = mp.get_context("fork")
    inboxes = [ctx.Queue() for _ in fpga_names]
    results = ctx.Queue()
    procs = [ctx.Process(target=_fpga_process, args=(r, work, make_runner, inboxes, results,
                                                     timeout_s, os.environ.get(FAULT_ENV)),
                         daemon=True)
             for r in range(len(fpga_names))]
    for p in procs:
        p.start()
    try:
        return _collect(procs, results, fpga_names, timeout_s * 2)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()


def bytes_by_link(reports: dict[int, dict], fpga_names: list[str]) -> dict[str, int]:
    """Bytes each FPGA sent each other one, by `SRC->DST` name."""
    return {f"{fpga_names[s]}->{fpga_names[d]}": b
            for s in sorted(reports) for d, b in sorted(reports[s]["sent"].items())}


def _collect(procs: list, results, fpga_names: list[str],
             patience_s: float) -> dict[int, dict]:
    """Every rank's report; the first rank to fail (an error it sent, or its process
    dying without one) ends the run at once as `rank N: ...`, a silent one after
    `patience_s` with no result."""
    reports: dict[int, dict] = {}
    waited = 0.0
    while len(reports) < len(procs):
        try:
            rank, report, error = results.get(timeout=POLL_S)
        except queue.Empty:
            waited += POLL_S
            dead = [r for r, p in enumerate(procs) if r not in reports and p.exitcode]
            if dead:
                code = procs[dead[0]].exitcode
                how = (f"killed by {signal.Signals(-code).name}" if code < 0
                       else f"exited with status {code}")
                raise RankFailure(f"rank {dead[0]}: FPGA '{fpga_names[dead[0]]}' {how}") \
                    from None
            if waited > patience_s:
                raise RankFailure(f"an FPGA process gave no result within {patience_s} s") \
                    from None
            continue
        if error:
            raise RankFailure(f"rank {rank}: FPGA '{fpga_names[rank]}': {error}")
        reports[rank] = report
    return reports


def _single_threaded(fn: Callable, *args: Any) -> Any:
    """`fn(*args)` on one torch thread, as the FPGA processes run: a kernel split over
    threads sums in another order (a conv over 64 channels differs in the last bits), and
    the split run must equal the unsplit one bit for bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(threads)


def expected_link_bytes(dag: ModelDAG, placement: dict[str, int]) -> Counter:
    """What the schedule says must cross FPGAs: each output once per reading FPGA."""
    links: Counter = Counter()
    for name in dag.order:
        for dst in {placement[s] for s in dag.successors[name]} - {placement[name]}:
            links[placement[name], dst] += dag.by_name[name].out_elements * 4
    return links


def emulate_dag(dag: ModelDAG, placement: dict[str, int], order: list[str],
                fpga_names: list[str], seed: int = 0, timeout_s: float = 60.0,
                given: Given | None = None) -> dict[str, Any]:
    """Run the split DAG and compare with the unsplit one on the same weights and inputs:
    seeded, or `given` (an imported module's parameters and the user's inputs)."""
    validate_dag(dag, dag.name)  # the plan's own check: what torch would refuse, refused here
    check_ops(dag)
    given = given or Given()

    def make_runner(mine: list[str]) -> LayerRunner:
        weights = {n: _weights(dag, n, seed, given) for n in mine}
        inputs = given.inputs if given.inputs is not None else model_inputs(dag, seed)

        def run(name: str, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            layer = dag.by_name[name]
            args = [values[d] for d in layer.deps] if layer.deps else [inputs[name]]
            return {name: run_layer(dag, name, args, weights[name])}
        return run

    work = Work(placement, list(order), {n: dag.by_name[n].deps for n in dag.order},
                {n: (n,) for n in dag.order}, tuple(sinks(dag)))
    reports = run_processes(work, make_runner, fpga_names, timeout_s)
    weights = {n: _weights(dag, n, seed, given) for n in dag.order}
    inputs = given.inputs if given.inputs is not None else model_inputs(dag, seed)
    reference = _single_threaded(run_dag, dag, inputs, weights)
    outputs = {n: torch.from_numpy(a) for r in reports.values()
               for n, a in r["outputs"].items()}
    diff = max(float((outputs[n] - reference[n]).abs().max()) for n in sinks(dag))
    equal = all(torch.equal(outputs[n], reference[n]) for n in sinks(dag))
    return {
        "model": dag.name, "processes": len(fpga_names), "agrees": equal,
        "outputs_equal": equal,
        "max_abs_diff": diff, "outputs": sinks(dag),
        "bytes_per_link": bytes_by_link(reports, fpga_names),
        "expected_bytes_per_link": {f"{fpga_names[s]}->{fpga_names[d]}": b for (s, d), b
                                    in sorted(expected_link_bytes(dag, placement).items())},
        "layers_per_fpga": {fpga_names[r]: reports[r]["weight_layers"] for r in sorted(reports)},
    }
