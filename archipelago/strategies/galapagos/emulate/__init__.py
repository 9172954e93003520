"""Functional emulation of a Galapagos build, libGalapagos style (seeds/000 §2.1): every
kernel of the plan is a thread exchanging packets through a software router, compute
kernels run I-BERT's integer modules, GMI kernels and gateways move the rows; the output
must be bit-identical to transformers' IBertModel (quant_mode) with the same weights.

    ibert      the integer modules       params     the model file system
    compute    each kernel's arithmetic  kernels    threads: compute, GMI, gateway, host
    router     packets and links         reference  the transformers model
"""

import threading
import time
from typing import Any

import numpy as np
import torch

from archipelago.emulate.job import EmulationJob
from archipelago.errors import ArchipelagoError
from archipelago.strategies.galapagos.emulate.kernels import (
    Wiring,
    run_compute,
    run_gateway,
    run_gmi,
    run_host,
)
from archipelago.strategies.galapagos.emulate.params import model_params
from archipelago.strategies.galapagos.emulate.reference import reference
from archipelago.strategies.galapagos.emulate.router import Endpoint, Router
from archipelago.strategies.galapagos.gmi import HOST
from archipelago.strategies.galapagos.plan import DataflowPlan


def emulate(plan: DataflowPlan, job: EmulationJob) -> dict[str, Any]:
    """The dataflow kind's emulator: I-BERT's integer kernels with seeded weights (the kind
    takes no --precision or --checkpoint: the pipeline refuses them)."""
    return emulate_galapagos(plan, job.workload.seq_len, job.seed, job.timeout_s)


def emulate_galapagos(plan: DataflowPlan, seq_len: int, seed: int = 0,
                      timeout_s: float = 300.0) -> dict[str, Any]:
    """Run one sequence of `seq_len` tokens through the build and compare its encoder
    output with the reference; returns the report (bit_exact, packets, bytes per link)."""
    spec = plan.spec
    if not 1 <= seq_len <= spec.max_positions - 2:
        raise ArchipelagoError(f"--seq-len {seq_len}: {spec.name} takes 1 to "
                               f"{spec.max_positions - 2} tokens")
    start = time.perf_counter()
    ref = reference(spec, seq_len, seed)
    params = model_params(ref.model, ref.embed_scale)
    wiring = Wiring(plan, seq_len)
    failed = threading.Event()
    router = Router(plan, failed, time.monotonic() + timeout_s)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def guarded(work, *args) -> None:
        try:
            work(*args)
        except BaseException as err:  # reported below, after every thread has stopped
            errors.append(err)
            failed.set()

    threads = []
    for name, node in plan.nodes.items():
        ep = Endpoint(plan, router, name)
        work = {"compute": lambda ep=ep: run_compute(wiring, ep, params, lock),
                "gmi": lambda ep=ep: run_gmi(wiring, ep),
                "gateway": lambda ep=ep: run_gateway(wiring, ep)}.get(node.role)
        if work is not None and name != HOST:
            threads.append(threading.Thread(target=guarded, args=(work,), name=name,
                                            daemon=True))
    for thread in threads:
        thread.start()
    result: list[np.ndarray] = []
    guarded(lambda: result.append(run_host(wiring, Endpoint(plan, router, HOST),
                                           ref.embedded[0].numpy())))
    for thread in threads:
        thread.join(timeout=max(0.0, router.deadline - time.monotonic()))
    if errors:
        first = next((e for e in errors if "another kernel failed" not in str(e)), errors[0])
        raise ArchipelagoError(f"galapagos emulation failed: {first}") from first
    output = torch.from_numpy(result[0].astype(np.float32)) * params[-1].out_scale
    diff = (output - ref.output[0]).abs().max().item()
    links = {k: {"packets": router.packets[k], "bytes": router.bytes[k]}
             for k in sorted(router.packets) if k != "local"}
    bit_exact = bool(torch.equal(output, ref.output[0]))
    return {
        "model": spec.name, "cluster": plan.cluster.name, "strategy": plan.strategy,
        "seq_len": seq_len, "seed": seed, "agrees": bit_exact,
        "bit_exact": bit_exact, "max_abs_diff": diff,
        "kernels": plan.kernel_count, "threads": len(threads) + 1,
        "packets": sum(router.packets.values()), "bytes": sum(router.bytes.values()),
        "local_packets": router.packets["local"], "links": links,
        "seconds": time.perf_counter() - start,
    }
