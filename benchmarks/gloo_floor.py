"""The floor the collectives alone put under an emulation: COUNT all-gathers of a WIDTH-float
slice per rank on RANKS processes, one torch thread each, no compute, as the emulator's
ranks run them: over gloo on loopback (torchrun's transport) and over shared memory (the
launcher's, archipelago/emulate/shared_memory.py). bench_emulate prints both beside each
rank count: on 2 cores, 4 ranks' gloo all-gathers alone took longer than one-process
transformers' whole run.

    python -m benchmarks.gloo_floor --ranks 4 --count 768 --width 256 [--transport shared]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from archipelago.emulate.exchange import Gloo, Transport
from archipelago.emulate.shared_memory import SharedMemory

TRANSPORTS = ("gloo", "shared")


def _transport(name: str, rank: int, ranks: int, port: int, folder: str) -> Transport:
    if name == "shared":
        return SharedMemory.world(Path(folder), rank, ranks, 600.0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    return Gloo(600.0)


def _rank(name: str, rank: int, ranks: int, count: int, width: int, port: int, folder: str,
          out: mp.Queue) -> None:
    torch.set_num_threads(1)
    transport = _transport(name, rank, ranks, port, folder)
    x = torch.randn(1, width)
    transport.all_gather(x)  # every rank has started
    start = time.perf_counter()
    for _ in range(count):
        transport.all_gather(x)
    out.put(time.perf_counter() - start)


def measure(ranks: int, count: int, width: int, transport: str = "gloo") -> float:
    """Wall seconds of the slowest rank's `count` all-gathers over `transport`."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    out = context.Queue()
    with tempfile.TemporaryDirectory(prefix="gloo-floor-") as folder:
        procs = [context.Process(target=_rank, args=(transport, r, ranks, count, width, port,
                                                     folder, out))
                 for r in range(ranks)]
        for proc in procs:
            proc.start()
        seconds = max(out.get(timeout=600) for _ in procs)
        for proc in procs:
            proc.join()
    return seconds


def in_subprocess(ranks: int, count: int, width: int, transport: str = "gloo") -> float:
    """`measure` in a fresh interpreter (its ranks then import this module, not the caller)."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.gloo_floor", "--ranks", str(ranks),
                          "--count", str(count), "--width", str(width), "--transport",
                          transport, "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--count", type=int, default=768)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--transport", choices=TRANSPORTS, default="gloo")
    parser.add_argument("--json", action="store_true", help="print only the seconds")
    args = parser.parse_args()
    seconds = measure(args.ranks, args.count, args.width, args.transport)
    print(json.dumps(seconds) if args.json else
          f"{args.ranks} ranks over {args.transport}: {args.count} all-gathers of "
          f"{args.width} floats in "
          f"{seconds:.2f} s ({seconds / args.count * 1e3:.2f} ms each)")


if __name__ == "__main__":
    main()
