"""The plan kind CHEF and H2H produce: a scheduled DAG (which IPs on which FPGA, which
layer on which accelerator from when to when), and the engine configuration both read."""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from archipelago.engines.base import EngineConfig
from archipelago.errors import ArchipelagoError, PartitionError, elide
from archipelago.hardware.machines import Cluster
from archipelago.models.dag import ModelDAG
from archipelago.models.dag_summary import model_summary
from archipelago.strategies.chef.deployment import Deployment, describe
from archipelago.strategies.chef.hls_precision import DEFAULT_PRECISION, fixed_bits
from archipelago.strategies.chef.ip_space import device_candidates
from archipelago.strategies.chef.ip_templates import IPTemplate, builtin_ips, load_ips
from archipelago.strategies.chef.simulate import Schedule, Tables


class ChefConfig(EngineConfig):
    """`--engine-config` for chef, h2h and chef-exact (the bandwidth between FPGAs is the
    cluster's: `--bandwidth` overrides its links, `bandwidth_override`)."""

    ips: tuple[str, ...] | None = None
    """Candidate IP names (default: every IP of the model's layer types)."""
    ip_file: str | None = None
    """A YAML file of IP templates replacing the built-in ones."""
    ip_space: Literal["templates", "device"] = "templates"
    """`device`: besides the templates, each grown to the most parallel instance every
    board of the cluster holds (ip_space.py); `templates`: the templates as written."""
    max_accs_per_fpga: int = Field(default=4, gt=0, le=16)
    """Assumption beyond Eq. (1): Fig. 5 shows up to three IPs per FPGA; more only slow
    the search (16: the bound, past which the deployment search would not end)."""
    hls_precision: str = DEFAULT_PRECISION
    """`archi build`'s fixed-point type of the hls4ml projects (ap_fixed<W,I>); the plan's
    own cost model stays FP32 (seeds/004 §I)."""

    @field_validator("hls_precision")
    @classmethod
    def _fixed_point(cls, text: str) -> str:
        fixed_bits(text)
        return text.strip()

    def candidates(self, cluster: Cluster) -> list[IPTemplate]:
        """The named (or all) templates; with `ip_space: device`, grown to `cluster`'s
        boards too."""
        table = load_ips(Path(self.ip_file)) if self.ip_file else builtin_ips()
        chosen = list(table.values()) if self.ips is None else self._named(table)
        if self.ip_space == "templates":
            return chosen
        return device_candidates(chosen, (node.resources for node in cluster.nodes))

    def _named(self, table: dict[str, IPTemplate]) -> list[IPTemplate]:
        unknown = [n for n in self.ips or () if n not in table]
        if unknown:
            raise ArchipelagoError(f"unknown IP(s) {elide(', '.join(unknown))}; valid: "
                                   f"{elide(', '.join(table), 200)}")
        return [table[n] for n in self.ips or ()]

    def candidates_source(self) -> str:
        """Where `candidates` came from, in the words of the files that gave them."""
        table = f"ip_file {elide(self.ip_file)}" if self.ip_file else \
            "the built-in templates, chef/ip_templates.yaml"
        grown = ", grown to the boards (ip_space: device)" * (self.ip_space == "device")
        if self.ips is None:
            return table + grown
        if not self.ips:
            return "the engine config's `ips: []`"
        return f"the engine config's `ips`, from {table}{grown}"


def bandwidth_override(cluster: Cluster, text: str) -> Cluster:
    """`--bandwidth GBPS`: the cluster's links overridden, every FPGA pair at BW_inter =
    GBPS GB/s (presets 0.125, 3, 15 of seeds/004 §VII-A), 1 MB/s to 10 TB/s as any link
    (hardware/machines.py says why)."""
    try:
        gbps = float(text)
    except ValueError:
        raise ArchipelagoError(f"--bandwidth {elide(text, 40)!r}: give GB/s between every "
                               "pair of FPGAs as a number (presets 0.125, 3, 15)") from None
    return cluster.with_bandwidth(gbps, elide(text.strip(), 40))


def check_dram(dag: ModelDAG, cluster: Cluster, dram: list[int]) -> None:
    need, have = sum(dram), sum(f.dram_bytes for f in cluster.nodes)
    if need > have:
        raise PartitionError(f"model '{dag.name}' keeps {need / 2**30:.2f} GiB of weights and "
                             f"features; cluster '{cluster.name}' has {have / 2**30:.2f} GiB "
                             f"of DRAM")


# Where a plan's search started (`origin`). CHEF's re-deployment (§IV-B) only removes or
# swaps accelerators and its re-mapping (§V-B) only moves layers next to neighbours, so each
# keeps the start's character: from Eq. (2)'s deployment of many small IPs it cannot grow back
# the one large IP per FPGA that H2H deploys, which a chain of layers runs fastest on. The
# search therefore starts from both and keeps the faster end (planners.plan_chef).
ORIGINS = {
    "a2f": "A2F's integer program, Eq. (2), mapped by M2A's list mapping (§IV-A, §V-A)",
    "h2h-deployment": "H2H's fixed accelerators, mapped by M2A's list mapping (§V-A)",
    "h2h-mapping": "H2H's fixed accelerators and mapping, re-mapped by M2A (§V-B)",
    "h2h": "H2H's four mapping steps",
    "exhaustive": "every deployment, each mapped optimally",
}


@dataclass(frozen=True)
class ScheduledDAG:
    strategy: str
    dag: ModelDAG
    cluster: Cluster
    deployment: Deployment
    tables: Tables
    schedule: Schedule
    steps_latency_s: tuple[float, ...]
    search_s: float
    origin: str
    """Where the search started, a key of ORIGINS."""
    hls_precision: str = DEFAULT_PRECISION
    """The hls4ml projects' fixed-point type (`archi build`)."""

    @property
    def latency_s(self) -> float:
        return self.schedule.latency_s

    def placement(self) -> dict[str, int]:
        """Layer name -> FPGA index (what the emulator needs)."""
        return {name: self.deployment.accs[acc].fpga
                for name, acc in zip(self.tables.names, self.schedule.mapping, strict=True)}

    def to_dict(self) -> dict:
        s = self.schedule
        return {
            "strategy": self.strategy, "model": self.dag.name, "cluster": self.cluster.name,
            "latency_s": s.latency_s, "comm_ratio": s.comm_ratio,
            "steps_latency_s": list(self.steps_latency_s), "search_s": self.search_s,
            "origin": self.origin,
            "layers": len(self.dag.layers), "compute_layers": self.dag.compute_layers,
            "model_summary": model_summary(self.dag),
            "deployment": describe(self.cluster, self.deployment),
            "mapping": [{"layer": name, "type": self.tables.type_of[i],
                         "accelerator": f"acc{s.mapping[i]}",
                         "fpga": self.cluster.nodes[self.tables.fpga_of[s.mapping[i]]].name,
                         "start_s": s.start[i], "end_s": s.end[i], "comm_s": s.comm_s[i]}
                        for i, name in enumerate(self.tables.names)],
        }
