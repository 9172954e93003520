"""The one link type every plan kind costs transfers on, and the catalog's named links.

A `Link` is one hop in the alpha-beta model (Hockney, "The communication challenge for MPP:
Intel Paragon and Meiko CS-2", Parallel Computing 20(3), 1994): a transfer of n bytes takes
`latency_s + n / bandwidth_Bps`, the bandwidth being payload bytes per second, after the
line code. The cluster answers the link between two of its nodes and a node's host link
(hardware/machines.Cluster.link, .host_link); the catalog's `links:` (NVLink, PCIe, Aurora)
and `switches:` (Ethernet) are the named ones a cluster is built from.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Payload bits per line bit of each line code a catalog link or a cluster file may name.
ENCODINGS = {
    "none": 1.0,
    # PCIe 1.x and 2.0: 8b/10b, 8 payload bits in every 10 (PCI Express Base 2.0 §4.2.1).
    "8b10b": 8 / 10,
    # Aurora 64B/66B (PG074): 64 payload bits in every 66 line bits (seeds/001 §V-E: "only 3%
    # transmission overhead").
    "64b66b": 64 / 66,
    # PCIe 3.0 onwards: 128b/130b (PCI Express Base 3.0 §4.2.2).
    "128b130b": 128 / 130,
}
Encoding = Literal["none", "8b10b", "64b66b", "128b130b"]
LinkKind = Literal["aurora", "nvlink", "pcie", "ethernet", "custom"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Link(_Frozen):
    """One hop: alpha (`latency_s`) and beta (1 / `bandwidth_Bps`, payload bytes a second
    per direction). `kind` says what the hop is (a GPU plan reports it); a cluster file's
    link given by its figures is "custom"."""

    latency_s: float = Field(ge=0)
    bandwidth_Bps: float = Field(gt=0)
    kind: LinkKind = "custom"

    def transfer_s(self, nbytes: float) -> float:
        """Seconds for one transfer of `nbytes` across this hop."""
        return self.latency_s + nbytes / self.bandwidth_Bps

    def at_bandwidth(self, bandwidth_Bps: float) -> "Link":
        """The same hop at another payload bandwidth (an override, e.g. CHEF's --bandwidth)."""
        return Link(latency_s=self.latency_s, bandwidth_Bps=bandwidth_Bps, kind=self.kind)


def line_Bps(line_gbps: float, encoding: Encoding = "none") -> float:
    """Payload bytes a second of a line running `line_gbps` Gb/s under `encoding`."""
    return line_gbps * ENCODINGS[encoding] * 1e9 / 8


class CatalogLink(_Frozen):
    """A named link of the catalog (`links:` in catalog.yaml): its latency and either its
    line rate with its line code (Aurora, PCIe) or its payload bandwidth where the source
    quotes bytes (NVLink's GB/s per direction)."""

    key: str
    name: str
    kind: LinkKind
    latency_s: float = Field(ge=0)
    line_gbps: float | None = Field(default=None, gt=0)
    encoding: Encoding = "none"
    bandwidth_Bps: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_rate(self) -> "CatalogLink":
        if (self.line_gbps is None) == (self.bandwidth_Bps is None):
            raise ValueError("give exactly one of line_gbps and bandwidth_Bps")
        return self

    def link(self, line_gbps: float | None = None) -> Link:
        """The hop; `line_gbps` runs the same line code and latency at another port rate
        (a board whose ports the catalog entry does not name)."""
        if line_gbps is None and self.bandwidth_Bps is not None:
            return Link(latency_s=self.latency_s, bandwidth_Bps=self.bandwidth_Bps,
                        kind=self.kind)
        rate = line_gbps if line_gbps is not None else self.line_gbps
        assert rate is not None  # _one_rate
        return Link(latency_s=self.latency_s, bandwidth_Bps=line_Bps(rate, self.encoding),
                    kind=self.kind)
