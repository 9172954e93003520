"""Accelerators on FPGAs: CHEF's deployment {F_i{Acc_j}} (seeds/004 §V), with the DRAM
bank each accelerator is wired to and the resources it takes."""

from collections import Counter
from dataclasses import dataclass

from archipelago.hardware.machines import Cluster
from archipelago.strategies.chef.ip_templates import IPTemplate


@dataclass(frozen=True)
class Accelerator:
    ip: IPTemplate
    fpga: int
    bank: int


@dataclass(frozen=True)
class Deployment:
    """Accelerators in a canonical order (by FPGA, then IP name), banks dealt round-robin
    over each FPGA's banks, so the same counts always give the same deployment."""

    accs: tuple[Accelerator, ...]

    @property
    def counts(self) -> Counter:
        return Counter((a.fpga, a.ip.name) for a in self.accs)

    def types(self) -> set[str]:
        return {a.ip.type for a in self.accs}


def deploy(cluster: Cluster, placed: list[tuple[int, IPTemplate]]) -> Deployment:
    """Put each (FPGA index, IP) on a bank of its FPGA: the k-th accelerator of an FPGA on
    bank k mod banks (sharing a bank only once every bank is taken)."""
    ordered = sorted(placed, key=lambda p: (p[0], -p[1].resources.dsp, p[1].name))
    seen: Counter = Counter()
    accs = []
    for fpga, ip in ordered:
        accs.append(Accelerator(ip, fpga, seen[fpga] % len(cluster.nodes[fpga].banks)))
        seen[fpga] += 1
    return Deployment(tuple(accs))


def fits(cluster: Cluster, placed: list[tuple[int, IPTemplate]]) -> bool:
    """Eq. (1)'s first two constraints: DSPs and BRAMs per FPGA."""
    dsp: Counter = Counter()
    bram: Counter = Counter()
    for fpga, ip in placed:
        dsp[fpga] += ip.resources.dsp
        bram[fpga] += ip.resources.bram
    return all(dsp[i] <= f.resources.dsp and bram[i] <= f.resources.bram
               for i, f in enumerate(cluster.nodes))


def describe(cluster: Cluster, deployment: Deployment) -> list[dict]:
    """Per FPGA: its accelerators (IP, parallelism, bank) and DSP/BRAM used of available."""
    out = []
    for i, fpga in enumerate(cluster.nodes):
        mine = [(j, a) for j, a in enumerate(deployment.accs) if a.fpga == i]
        out.append({
            "fpga": fpga.name, "device": fpga.device.key, "freq_mhz": fpga.clock_hz / 1e6,
            "accelerators": [{"acc": f"acc{j}", "ip": a.ip.name, "type": a.ip.type,
                              "tn": a.ip.tn, "tm": a.ip.tm, "parallel": a.ip.macs_per_cycle,
                              "bank": a.bank} for j, a in mine],
            "dsp_used": sum(a.ip.resources.dsp for _, a in mine),
            "dsp_available": fpga.resources.dsp,
            "bram_used": sum(a.ip.resources.bram for _, a in mine),
            "bram_available": fpga.resources.bram,
        })
    return out
