"""The modelling tool of seeds/003 §III: the latency of a Program is the aggregate of its
calls' proxies. CPU calls use measured CPU proxies, `fpga_execute` the NPU overlay's cycle
model, transfers the per-card PCIe model. What overlaps:

- calls issued in one `parallel()` region go to different cards: position by position
  (the i-th call of every card's chain), transfers share the concurrent-PCIe rule and
  executions take the slowest card;
- everything else runs one after another, as the host program issues it.
"""

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from archipelago.strategies.host_offload.pcie import concurrent_s, transfer_s
from archipelago.strategies.host_offload.plan import HostPlan
from archipelago.strategies.host_offload.program import Call, Category
from archipelago.strategies.host_offload.proxies import CPUProfile, load_profile

# seeds/003 §IV: "The biggest overlay program within our benchmarks is 2.9 KB".
PROGRAM_BYTES = 2900


@dataclass
class HostEstimate:
    latency_s: float
    setup_s: float
    breakdown_s: dict[str, float]
    per_call: dict[str, dict[str, float]]
    onchip_bytes: list[int]
    onchip_capacity_bytes: list[int]
    feasible: bool
    reasons: list[str] = field(default_factory=list)
    cpu_profile: str = ""  # whose CPU proxies priced the cpu_* calls

    def top_calls(self, n: int = 5) -> list[tuple[str, dict[str, float]]]:
        """The bottleneck calls: the ones that account for the most time."""
        return sorted(self.per_call.items(), key=lambda kv: -kv[1]["time_s"])[:n]


class _Coster:
    """Prices single calls of one plan."""

    def __init__(self, plan: HostPlan, profile: CPUProfile) -> None:
        self.plan, self.profile = plan, profile
        self.shares = [d.fabric_share(plan.card_weight_bytes(k))
                       for k, d in enumerate(plan.designs)]

    def is_pcie(self, call: Call) -> bool:
        return call.category == "comm" and call.source == "host"

    def bytes_of(self, call: Call) -> int:
        return PROGRAM_BYTES if call.name == "fpga_pgm" else call.nbytes

    def time_s(self, call: Call) -> float:
        if call.category == "cpu":
            return self.profile.time_s(call.name, call.elements)
        card = call.device
        assert card is not None
        if call.name == "fpga_execute":
            program = self.plan.program.overlays[call.target]
            return self.plan.designs[card].execute_s(program.instrs, self.shares[card])
        if call.source == "ddr4":  # a streamed block read from the card's own DDR4
            ddr = self.plan.designs[card].device.memory("ddr")
            assert ddr is not None
            return call.nbytes / ddr.bandwidth_Bps
        return transfer_s(self.plan.links[card], self.bytes_of(call))

    def position_s(self, calls: list[Call]) -> tuple[float, Call]:
        """Calls at the same position of several cards' chains: concurrent PCIe transfers
        together, everything else the slowest; returns the time and the call that set it."""
        pcie = [c for c in calls if self.is_pcie(c)]
        others = [c for c in calls if not self.is_pcie(c)]
        best, setter = 0.0, calls[0]
        if pcie:
            best = concurrent_s([(self.plan.links[c.device], self.bytes_of(c))  # type: ignore[index]
                                 for c in pcie])
            setter = max(pcie, key=lambda c: self.bytes_of(c))
        for c in others:
            t = self.time_s(c)
            if t > best:
                best, setter = t, c
        return best, setter


def _regions(calls: list[Call]) -> list[list[Call]]:
    """Consecutive calls of one parallel region together; lone calls alone."""
    out: list[list[Call]] = []
    for call in calls:
        if out and call.group is not None and out[-1][0].group == call.group:
            out[-1].append(call)
        else:
            out.append([call])
    return out


def positions(calls: list[Call], coster: _Coster) -> Iterator[tuple[list[Call], float, Call]]:
    """The program as the host issues it: each position's concurrent calls (one alone
    outside parallel regions), its time and the call that set it, in order."""
    for region in _regions(calls):
        chains: dict[int | None, list[Call]] = defaultdict(list)
        for call in region:
            chains[call.device].append(call)
        for pos in range(max(len(chain) for chain in chains.values())):
            at = [chain[pos] for chain in chains.values() if pos < len(chain)]
            yield (at, *coster.position_s(at))


def aggregate(calls: list[Call], coster: _Coster) -> tuple[float, dict[Category, float],
                                                           dict[str, dict[str, float]]]:
    """Total time of a call list, by category and by call name."""
    breakdown: dict[Category, float] = {"cpu": 0.0, "fpga": 0.0, "comm": 0.0}
    per_call: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "time_s": 0.0})
    total = 0.0
    for at, t, setter in positions(calls, coster):
        for call in at:
            per_call[call.name]["count"] += 1
        total += t
        breakdown[setter.category] += t
        per_call[setter.name]["time_s"] += t
    return total, breakdown, dict(per_call)


def call_timeline(plan: HostPlan, limit: int) -> list[tuple[Call, float, float]]:
    """The first `limit` calls of one inference as (call, start, seconds) on the host's
    clock: each position starts when the one before it has finished."""
    coster = _Coster(plan, load_profile(plan.cpu_profile))
    out, now = [], 0.0
    for at, t, _ in positions(plan.program.calls, coster):
        out.extend((call, now, coster.time_s(call)) for call in at)
        now += t
        if len(out) >= limit:
            break
    return out


def estimate_host(plan: HostPlan, profile: CPUProfile) -> HostEstimate:
    """Latency of one inference (setup, i.e. programs and persistent weights, excluded and
    reported apart), its CPU / FPGA / communication breakdown and the costliest calls."""
    coster = _Coster(plan, profile)
    setup_s, _, _ = aggregate(plan.program.setup, coster)
    latency, breakdown, per_call = aggregate(plan.program.calls, coster)
    reasons = plan.feasibility()
    return HostEstimate(
        latency_s=latency, setup_s=setup_s, breakdown_s=dict(breakdown), per_call=per_call,
        onchip_bytes=[plan.card_weight_bytes(k) for k in range(plan.cards)],
        onchip_capacity_bytes=[d.onchip_bytes for d in plan.designs],
        feasible=not reasons, reasons=reasons, cpu_profile=profile.machine)


def estimate(plan: HostPlan, workload: None = None) -> HostEstimate:
    """The host-program kind's estimator: the plan's program priced with its host's CPU
    proxies (the plan names them, else this machine's are used)."""
    return estimate_host(plan, load_profile(plan.cpu_profile))
