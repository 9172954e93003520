"""The floor the collectives alone put under an emulation: COUNT all-gathers of a WIDTH-float
slice per rank on RANKS gloo processes over loopback, one torch thread each, no compute, as
the emulator's ranks run them. bench_emulate prints it beside each rank count: on 2 cores,
4 ranks' all-gathers alone took longer than one-process transformers' whole run.

    python -m benchmarks.gloo_floor --ranks 4 --count 768 --width 256
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _rank(rank: int, ranks: int, count: int, width: int, port: int, out: mp.Queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    x = torch.randn(1, width)
    parts = [torch.empty_like(x) for _ in range(ranks)]
    dist.barrier()
    start = time.perf_counter()
    for _ in range(count):
        dist.all_gather(parts, x)
    out.put(time.perf_counter() - start)
    dist.destroy_process_group()


def measure(ranks: int, count: int, width: int) -> float:
    """Wall seconds of the slowest rank's `count` all-gathers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    out = context.Queue()
    procs = [context.Process(target=_rank, args=(r, ranks, count, width, port, out))
             for r in range(ranks)]
    for proc in procs:
        proc.start()
    seconds = max(out.get(timeout=600) for _ in procs)
    for proc in procs:
        proc.join()
    return seconds


def in_subprocess(ranks: int, count: int, width: int) -> float:
    """`measure` in a fresh interpreter (its ranks then import this module, not the caller)."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.gloo_floor", "--ranks", str(ranks),
                          "--count", str(count), "--width", str(width), "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--count", type=int, default=768)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--json", action="store_true", help="print only the seconds")
    args = parser.parse_args()
    seconds = measure(args.ranks, args.count, args.width)
    print(json.dumps(seconds) if args.json else
          f"{args.ranks} ranks: {args.count} all-gathers of {args.width} floats in "
          f"{seconds:.2f} s ({seconds / args.count * 1e3:.2f} ms each)")


if __name__ == "__main__":
    main()
