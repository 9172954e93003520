"""What the library returns: typed results whose shared figures have one name across plan
kinds and calls (an FPGA ring's estimate and a GPU's, a comparison's row, a service's
summary): `latency_s`, `ttft_s` (time to the first token: the prefill), `tpot_s` (time per
output token: a decode step), `tokens_per_s`, `boards`, `upfront_usd`, `feasible`. A figure
a kind does not estimate is None, never a number of another meaning. Each result keeps the
object `--json` prints of the same request in `details`, and has `to_dict()`; lists of
results and a comparison's rows become pandas DataFrames (`to_pandas`, the optional
`tables` extra: `pip install archipelago[tables]`)."""

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ArchipelagoError("to_pandas needs pandas, which is not installed: pip install "
                               "'archipelago[tables]' (or pandas)") from None
    return pandas


def to_pandas(results: Any) -> Any:
    """A DataFrame of `results` (a list of results or of rows), one row each, the columns
    their `to_dict(flat=True)` keys; one result gives one row."""
    items = results if isinstance(results, list | tuple) else [results]
    return _pandas().DataFrame([r.to_dict(flat=True) for r in items])


class _Result:
    """`to_dict` (every field; `flat` leaves out `details`, for a table's row) and
    `to_pandas` for every result dataclass."""

    def to_dict(self, flat: bool = False) -> dict[str, Any]:
        data = asdict(self)  # type: ignore[call-overload]
        if flat:
            data.pop("details", None)
        return {k: str(v) if isinstance(v, Path) else v for k, v in data.items()}

    def to_pandas(self) -> Any:
        return to_pandas([self])


def upfront_usd(devices: list[str]) -> float | None:
    """The boards' price (estimate/energy.py), None when any board has none."""
    from archipelago.estimate import energy
    from archipelago.hardware.catalog import get_device

    total = 0.0
    for key, count in Counter(devices).items():
        usd = energy.upfront_usd(get_device(key), count)
        if usd is None:
            return None
        total += usd
    return total


@dataclass(frozen=True)
class Estimate(_Result):
    """One plan's figures, named alike for every plan kind."""

    model: str
    cluster: str
    strategy: str
    kind: str  # the strategy's plan kind (tensor-parallel, gpu, dataflow, ...)
    feasible: bool
    reasons: list[str]
    latency_s: float  # the whole request: every output token, or one inference
    ttft_s: float | None  # time to first token (prefill); None: the kind generates none
    tpot_s: float | None  # time per output token (one decode step)
    tokens_per_s: float | None
    boards: int
    devices: list[str]  # each board's catalog key
    upfront_usd: float | None  # the boards' price; None where the catalog has none
    batch: int | None = None
    precision: str | None = None
    details: dict[str, Any] = field(default_factory=dict, repr=False)  # `plan --json`


def estimate_of(strategy: str, cluster: Any, shown_cluster: str, est: Any, work: Any,
                details: dict[str, Any]) -> Estimate:
    """The shared figures of a kind's estimate `est` (its attributes of these meanings,
    where it has them) and the workload it was costed on."""
    from archipelago.strategies.registry import get_strategy

    devices = [d.key for d in cluster.devices]
    precision = getattr(work, "precision", None)
    return Estimate(
        model=str(details.get("model", "")), cluster=shown_cluster, strategy=strategy,
        kind=get_strategy(strategy).kind, feasible=bool(getattr(est, "feasible", True)),
        reasons=list(getattr(est, "reasons", [])), latency_s=float(est.latency_s),
        ttft_s=getattr(est, "prefill_s", None), tpot_s=getattr(est, "decode_s_per_token", None),
        tokens_per_s=getattr(est, "tokens_per_s", None), boards=len(devices),
        devices=devices, upfront_usd=upfront_usd(devices),
        batch=getattr(work, "batch", None),
        precision=None if precision is None else str(getattr(precision, "name", precision)),
        details=details)


@dataclass(frozen=True)
class Plan(_Result):
    """A plan (the kind's object), the workload it was costed on and its estimate."""

    estimate: Estimate
    plan: Any = field(repr=False)
    workload: Any = field(repr=False)
    engine: str | None = None  # which engine ran: published, or a searched one's label

    def to_dict(self, flat: bool = False) -> dict[str, Any]:
        """The estimate's dict (`archi plan --json`'s object under `details`)."""
        return {**self.estimate.to_dict(flat), "engine": self.engine}


@dataclass(frozen=True)
class Row(_Result):
    """One compared combination that fits: the Estimate's names for the same figures."""

    rank: int
    front: bool  # on the Pareto front of latency and upfront cost
    meets_target: bool | None  # None: no latency target was given
    strategy: str
    cluster: str
    device: str
    boards: int
    batch: int
    precision: str | None
    latency_s: float
    ttft_s: float
    tpot_s: float
    tokens_per_s: float
    upfront_usd: float | None
    tokens_per_s_per_million_usd: float | None
    joules_per_token: float | None
    binding: str
    split: str
    engine: str


def row_of(data: dict[str, Any]) -> Row:
    """A row of `archi compare --json`'s `rows`."""
    return Row(data["rank"], data["front"], data["meets_target"], data["strategy"],
               f"{data['count']}x{data['device']}", data["device"], data["count"],
               data["batch"], data.get("precision"), data["latency_s"], data["prefill_s"],
               data["decode_s_per_token"], data["tokens_per_s"], data["upfront_usd"],
               data["tokens_per_s_per_million_usd"], data["joules_per_token"],
               data["binding"], data["split"], data["engine"])


@dataclass(frozen=True)
class Comparison(_Result):
    """`archi compare`'s answer: the ranked rows, why the rest are absent, the store."""

    model: str
    tokens: str
    rows: list[Row]
    refused: list[str]  # one line per reason, as the CLI prints them
    infeasible: list[str]
    not_compared: dict[str, str]  # strategy: why it takes no part
    store: Path
    details: dict[str, Any] = field(default_factory=dict, repr=False)  # `compare --json`

    @property
    def front(self) -> list[Row]:
        return [r for r in self.rows if r.front]

    def to_pandas(self) -> Any:
        """The rows, one per fitting combination, in rank order."""
        return to_pandas(self.rows)


@dataclass(frozen=True)
class Emulation(_Result):
    """`archi emulate`'s answer: whether the split run agrees with its reference."""

    model: str
    cluster: str
    strategy: str
    agrees: bool
    details: dict[str, Any] = field(default_factory=dict, repr=False)  # `emulate --json`


@dataclass(frozen=True)
class Build(_Result):
    """`archi build`'s answer: the files written under `out`."""

    out: Path
    files: list[str]
    details: dict[str, Any] = field(default_factory=dict, repr=False)  # `build --json`


@dataclass(frozen=True)
class Service(_Result):
    """`archi serve`'s answer at one rate: latency percentiles ({p50, p90, p99, mean}, in
    seconds, the Estimate's names), throughput, goodput, the capacity at the targets and
    the cost per million output tokens (None: a price is unknown)."""

    model: str
    cluster: str
    strategy: str
    rate: float
    ttft_s: dict[str, float]
    tpot_s: dict[str, float]
    tokens_per_s: float
    goodput_requests_per_s: float
    capacity_rate: float
    boards: int
    upfront_usd: float | None  # every bought item: boards and host servers
    usd_per_million_tokens: float | None  # output tokens
    details: dict[str, Any] = field(default_factory=dict, repr=False)  # `serve --json`

