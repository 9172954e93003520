"""`archi serve --prefill-cluster`: a prefill pool beside the served (decode) pool, the
link their KV caches cross (disaggregated.py), and what the result says of each pool.
Names no strategy or kind: the prefill plan is any plan whose kind has the `serving` hook.

The cache crosses in the narrower of the two plans' KV formats: the side holding the wider
one converts at its end (an elementwise pass, nothing beside the link's time)."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.estimate.iteration import IterationTable
from archipelago.hardware.link import Link
from archipelago.models.spec import ModelSpec
from archipelago.serving.disaggregated import Disaggregated, kv_bytes, simulate_disaggregated
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Requests
from archipelago.serving.simulate import MAX_REPLICAS

# One hop through a 100 GbE switch (catalog `switches: eth-100g`, the SN2700's datasheet
# figures): the host servers' NIC (catalog `hosts: pcie-4u-8` is priced with a 100G NIC)
# and the U280's QSFP28 ports (catalog u280 `network:`, seeds/001 §IV-A: 100 Gb/s) both run
# 100 GbE.
DEFAULT_KV_LINK = "eth-100g"


def kv_link(name: str | None) -> tuple[str, Link]:
    """The link `--kv-link` names (a catalog link or switch), DEFAULT_KV_LINK if none."""
    from archipelago.hardware.catalog import get_link

    key = (name or DEFAULT_KV_LINK).strip().lower()
    try:
        return key, get_link(key)
    except ArchipelagoError as error:
        raise ArchipelagoError(f"--kv-link: {error}") from None


def check_pool_options(prefill_cluster: str | None, prefill_strategy: str | None,
                       prefill_replicas: int | None, link: str | None) -> None:
    """The one-line refusals of the prefill pool's options, before any plan is made."""
    if prefill_cluster is None:
        given = [flag for flag, value in (("--prefill-strategy", prefill_strategy),
                                          ("--prefill-replicas", prefill_replicas),
                                          ("--kv-link", link)) if value is not None]
        if given:
            raise ArchipelagoError(f"{given[0]}: needs --prefill-cluster (the pool that "
                                   "prefills)")
        return
    if prefill_replicas is not None and not 1 <= prefill_replicas <= MAX_REPLICAS:
        raise ArchipelagoError(f"--prefill-replicas {prefill_replicas}: must be in "
                               f"1..{MAX_REPLICAS}")
    kv_link(link)


@dataclass(frozen=True)
class PrefillPool:
    """`replicas` copies of a prefill plan, and the link each sends its caches over."""

    strategy: str
    cluster: str
    table: IterationTable
    replicas: int
    link_name: str
    link: Link
    spec: ModelSpec

    def serve(self, decode: IterationTable, requests: Requests, rate: float, policy: Policy,
              decode_replicas: int, router: str) -> Disaggregated:
        value_bytes = min(self.table.kv_value_bytes, decode.kv_value_bytes)
        return simulate_disaggregated(self.table, decode, requests, rate, policy, self.link,
                                      kv_bytes(self.spec, requests.prompt, value_bytes),
                                      self.replicas, decode_replicas, router)

    def report(self, out: Disaggregated, span_s: float, cluster: str, strategy: str,
               decode_replicas: int) -> dict[str, Any]:
        """Each pool's plan and busy shares, and the link's load, for the result."""
        busy = [float(b) / span_s for b in out.busy_s]
        sent = ~np.isnan(out.transfer_s)
        seconds = out.transfer_s[sent]
        return {
            "pools": {
                "prefill": {"cluster": self.cluster, "strategy": self.strategy,
                            "replicas": self.replicas, "kv_cache_tokens": self.table.kv_tokens,
                            "busy_share": busy[:self.replicas]},
                "decode": {"cluster": cluster, "strategy": strategy,
                           "replicas": decode_replicas,
                           "busy_share": busy[self.replicas:]}},
            "kv_link": {
                "name": self.link_name, "bandwidth_Bps": self.link.bandwidth_Bps,
                "latency_s": self.link.latency_s, "requests_sent": int(sent.sum()),
                "bytes_mean": float(out.moved_bytes[sent].mean()) if sent.any() else 0.0,
                "transfer_s": {"mean": float(seconds.mean()) if sent.any() else 0.0,
                               "max": float(seconds.max()) if sent.any() else 0.0},
                "busy_share": [float(b) / span_s for b in out.link_busy_s]},
        }


def pool_rows(rates: Any, result: dict[str, Any]) -> None:
    """Rows of the serve table for each pool's busy share and the link's load."""
    for name, pool in result["pools"].items():
        busy = pool["busy_share"] or [0.0]
        rates.add_row(f"{name} pool ({pool['strategy']} on {pool['cluster']} x"
                      f"{pool['replicas']}) busy", f"{100 * sum(busy) / len(busy):.1f}% mean, "
                      f"{100 * max(busy):.1f}% busiest replica")
    link = result["kv_link"]
    rates.add_row(f"KV cache over {link['name']} ({link['bandwidth_Bps'] / 1e9:,.2f} GB/s, "
                  f"{link['latency_s'] * 1e6:,.2f} us)",
                  f"{link['bytes_mean'] / 2**20:,.1f} MiB in "
                  f"{link['transfer_s']['mean'] * 1e3:,.2f} ms per request · "
                  f"{100 * max(link['busy_share'] or [0.0]):.1f}% busiest link")
