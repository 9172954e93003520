"""Predicted figures of the Intel CPU + multi-FPGA row (issue #12, seeds/003 §IV). These
are predictions from the modelling tool (NPU overlay cycles, PCIe model, CPU proxies of
the profile in use); the paper's measurements are held out. The CPU figures depend on the
profile's machine: the shipped profiles/dev-host.json unless ~/.cache/archipelago (or
$ARCHIPELAGO_HOME) holds one `archi proxies` wrote, or --cpu-profile names one.

    python -m benchmarks.predictions_host_offload [--cpu-profile FILE] [--vocab V]
"""

import argparse
import dataclasses
from pathlib import Path

from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import get_device
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.machines import host_link_of
from archipelago.strategies.host_offload.estimate import estimate_host
from archipelago.strategies.host_offload.explore import CARD_TYPES, largest_report
from archipelago.strategies.host_offload.pcie import concurrent_s
from archipelago.strategies.host_offload.plan import configured_plan
from archipelago.strategies.host_offload.proxies import load_profile
from archipelago.strategies.host_offload.service import host_request, plan_report

COUNTS = (1, 2, 4, 8)
VOCAB_CALLS = ("cpu_pickTop", "cpu_log", "cpu_softmax")  # each decoder step, over the vocab


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


def breakdown(report: dict) -> str:
    b = report["breakdown_s"]
    return f"cpu {ms(b['cpu'])}  fpga {ms(b['fpga'])}  comm {ms(b['comm'])}"


def luong_scaling(profile: Path | None, vocab: int | None) -> None:
    """seeds/003 §IV "Scaling Study" (Fig. 5b/5c): the largest persistent NMT-Luong on
    1 .. 8 S10 cards, priced with numpy's calls (the proxies before issue 20) and with the
    fitted native calls (now): model size and latency relative to one card, CPU share."""
    native = load_profile(profile)
    priced = {"numpy calls (before)": dataclasses.replace(native, native=False),
              "native calls (now)": native}
    sized = []
    for n in COUNTS:
        request = host_request(model="nmt-luong", cluster=f"{n}xs10-2800", steps=50,
                               vocab=vocab, cpu_profile=profile)
        hidden = largest_report(request)["hidden"]
        req = request.with_options(hidden=hidden)
        spec = req.spec()
        sized.append((n, spec, configured_plan(spec, resolve_cluster(req.cluster), req.config)))
    print(f"\n== NMT-Luong 1 -> 8 S10 cards, largest persistent ({vocab or '50K'} words, "
          "50 + 50 steps): growth over one card; vocab: the CPU's pickTop, log and softmax "
          "over the vocabulary, other: its hidden-sized calls")
    for label, cpu in priced.items():
        first = None
        for n, spec, plan in sized:
            est = estimate_host(plan, cpu)
            first = first or (spec.params, est.latency_s, est.breakdown_s["cpu"])
            at_vocab = sum(cpu.time_s(c.name, c.elements) for c in plan.program.calls
                           if c.name in VOCAB_CALLS and c.elements == spec.tgt_vocab)
            print(f"{label:21} {n} x S10  hidden {spec.hidden:5d}  {spec.params / 1e6:6.1f} M "
                  f"x{spec.params / first[0]:4.1f}   {ms(est.latency_s)} "
                  f"x{est.latency_s / first[1]:5.2f}   cpu {ms(est.breakdown_s['cpu'])} "
                  f"x{est.breakdown_s['cpu'] / first[2]:5.2f} "
                  f"({100 * est.breakdown_s['cpu'] / est.latency_s:2.0f}%): vocab "
                  f"{ms(at_vocab)}, other {ms(est.breakdown_s['cpu'] - at_vocab)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu-profile", type=Path, default=None)
    parser.add_argument("--vocab", type=int, default=None, help="NMT vocabulary (50K)")
    args = parser.parse_args()
    profile, vocab = args.cpu_profile, args.vocab

    print("== API primitives (Fig. 4a/4b form): CPU calls at 8K elements, transfers to N cards")
    cpu = load_profile(profile)
    print("  ".join(f"{name[4:]} {cpu.time_s(name, 8192) * 1e6:.2f} us"
                    for name in ("cpu_add", "cpu_mul", "cpu_dot", "cpu_tanh", "cpu_exp",
                                 "cpu_softmax", "cpu_pickTop")) + f"   ({cpu.machine})")
    for device in ("a10-1150", "s10-2800"):
        link = host_link_of(get_device(device))
        for size in (1024, 8192, 32768, 262144):
            row = "  ".join(f"{n} cards {concurrent_s([(link, size)] * n) * 1e6:7.2f} us"
                            for n in (1, 2, 4))
            print(f"{device:9} {size:7d} B   {row}")

    print("\n== matrix-vector, 11,904 x 11,904 (11.9K, divisible by 8) on 8 x S10, by partition")
    for grid in ("8x1", "4x2", "2x4", "1x8"):
        r = plan_report(host_request(model="matvec", cluster="8xs10-2800", hidden=11904,
                                     partition=grid, steps=1, cpu_profile=profile))
        print(f"{grid:5} {ms(r['latency_s'])}   {breakdown(r)}   feasible {r['feasible']}")

    print("\n== largest square matrix persistent on N x S10 (N x 1 row blocks)")
    for n in COUNTS:
        r = largest_report(host_request(model="matvec", cluster=f"{n}xs10-2800", steps=1,
                                        partition=f"{n}x1", cpu_profile=profile),
                           granularity=8 * n)
        print(f"{n} x S10: {r['hidden']:6d}^2 = {r['params'] / 1e6:7.1f} M  {ms(r['latency_s'])}")

    print("\n== largest persistent LSTM (input = hidden, 1 layer) on N x S10, 50 steps")
    for n in COUNTS:
        r = largest_report(host_request(model="lstm", cluster=f"{n}xs10-2800", steps=50,
                                        cpu_profile=profile))
        print(f"{n} x S10: hidden {r['hidden']:6d}  {r['params'] / 1e6:7.1f} M params  "
              f"{ms(r['latency_s'])}   {breakdown(r)}")

    print(f"\n== NMT-Luong ({vocab or 'default 50K'} vocabulary) at the largest persistent "
          "size, 50-step input and 50 output steps")
    for device in CARD_TYPES:
        for n in COUNTS:
            try:
                r = largest_report(host_request(model="nmt-luong", cluster=f"{n}x{device}",
                                                steps=50, vocab=vocab, cpu_profile=profile))
            except ArchipelagoError as err:
                print(f"{n} x {device:12} {err}")
                continue
            print(f"{n} x {device:12} hidden {r['hidden']:5d}  {r['params'] / 1e6:7.1f} M  "
                  f"{ms(r['latency_s'])}   {breakdown(r)}")

    luong_scaling(profile, vocab)

    print("\n== NMT-Li (beam 5): persistent on 8 x S10 vs streamed on one S10, 50 steps")
    big = largest_report(host_request(model="nmt-li", cluster="8xs10-2800", steps=50,
                                      vocab=vocab, cpu_profile=profile))
    print(f"persistent 8 x S10: hidden {big['hidden']}  {big['params'] / 1e6:.1f} M  "
          f"{ms(big['latency_s'])}   {breakdown(big)}")
    for weights in ("pcie", "ddr4"):
        r = plan_report(host_request(model="nmt-li", cluster="1xs10-2800", steps=50,
                                     hidden=big["hidden"], weights=weights,
                                     vocab=vocab, cpu_profile=profile))
        print(f"{weights:4} 1 x S10:         {ms(r['latency_s'])}   {breakdown(r)}   "
              f"x{r['latency_s'] / big['latency_s']:.1f} of persistent")


if __name__ == "__main__":
    main()
