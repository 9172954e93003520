"""What `archi compare` is asked: the option texts read into a checked request, each mistake
one line naming the option, the value and the valid choices.

Default devices: those the catalog tags `compare_default` (catalog.yaml says which and why:
every HBM FPGA and the four GPUs the papers and users compare against). Counts 1, 2, 4, 8:
the DFX appliance's sizes (seeds/001 §VI).
"""

import re
from dataclasses import dataclass

from archipelago.compare.service import Service
from archipelago.durations import parse_seconds
from archipelago.errors import ArchipelagoError, UnknownNameError
from archipelago.estimate.workload import MAX_BATCH, Generation, parse_tokens
from archipelago.explore.best import check_engine
from archipelago.hardware.catalog import catalog, compare_defaults
from archipelago.hardware.machines import MAX_DEVICES
from archipelago.number_formats import canonical

DEFAULT_COUNTS = "1,2,4,8"
SORTS = ("latency", "cost", "tokens-per-dollar", "joules-per-token")
SERVING_SORT = "usd-per-million-tokens"  # with --rate only, and then the default
_MAX_LIST = 64  # entries in one list option: more is a typo, not a comparison


@dataclass(frozen=True)
class Request:
    """A comparison: every (strategy, device, count, batch, format) of these lists."""

    model: str
    tokens: Generation
    devices: tuple[str, ...]
    counts: tuple[int, ...]
    strategies: tuple[str, ...] | None  # None: every strategy that applies
    batches: tuple[int, ...]
    latency_target_s: float | None = None
    sort: str = "latency"
    precisions: tuple[str, ...] = ()  # --precision's formats; none: each strategy's own
    engine: str = "best"  # --engine: each row's engine, the best searched or the published
    service: Service | None = None  # --rate: what every fitting combination is to serve


def _items(option: str, text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ArchipelagoError(f"{option} '{text[:40]}': give a comma-separated list with no "
                               "empty entries")
    if len(items) > _MAX_LIST:
        raise ArchipelagoError(f"{option}: {len(items)} entries; at most {_MAX_LIST}")
    return list(dict.fromkeys(items))


def default_devices() -> str:
    """`--devices` when none are named: the catalog's `compare_default` devices."""
    return ",".join(compare_defaults())


def parse_devices(text: str) -> tuple[str, ...]:
    known = catalog()
    names = [t.lower() for t in _items("--devices", text)]
    for name in names:
        if name not in known:
            raise UnknownNameError("device in --devices", name, known)
    return tuple(names)


def _whole_numbers(option: str, text: str, high: int, what: str) -> tuple[int, ...]:
    out = []
    for item in _items(option, text):
        if not re.fullmatch(r"[0-9]{1,7}", item) or not 1 <= int(item) <= high:
            raise ArchipelagoError(f"{option} {item[:24]!r}: each {what} must be a whole "
                                   f"number in 1..{high}")
        out.append(int(item))
    return tuple(sorted(set(out)))


def parse_counts(text: str) -> tuple[int, ...]:
    return _whole_numbers("--counts", text, MAX_DEVICES, "device count")


def parse_batches(text: str) -> tuple[int, ...]:
    return _whole_numbers("--batch", text, MAX_BATCH, "batch")


def parse_strategies(text: str, applicable: list[str], every: list[str]) -> tuple[str, ...] | None:
    """None for `all`; else the named strategies, each known and one that compare takes."""
    if text.strip().lower() == "all":
        return None
    names = _items("--strategies", text)
    for name in names:
        if name not in every:
            raise UnknownNameError("strategy in --strategies", name, ["all", *every])
        if name not in applicable:
            raise ArchipelagoError(f"--strategies {name}: not compared (it estimates no text "
                                   f"generation); strategies compared: all, "
                                   f"{', '.join(applicable)}")
    return tuple(names)


def parse_latency(text: str) -> float:
    """`50ms`, `0.2 s`, `800us`: seconds."""
    return parse_seconds("--latency-target", text)


def parse_sort(text: str | None, serving: bool = False) -> str:
    """The sort asked for; left out: by $ per million tokens with --rate, else latency."""
    if text is None:
        return SERVING_SORT if serving else "latency"
    valid = (*SORTS, SERVING_SORT) if serving else SORTS
    if text not in valid:
        extra = "" if serving else f" ({SERVING_SORT} with --rate)"
        raise ArchipelagoError(f"--sort '{text[:40]}': valid choices: {', '.join(valid)}"
                               f"{extra}")
    return text


def parse_request(model: str, tokens: str, devices: str, counts: str, strategies: str,
                  batches: str, latency_target: str | None, sort: str | None,
                  applicable: list[str], every: list[str],
                  precision: str | None = None, engine: str = "best",
                  service: Service | None = None) -> Request:
    """Every option checked before any work; `applicable` are the strategies compare takes
    for this model, `every` all the registered ones. Each format of `precision`, when
    given, goes to every strategy: one whose kind or device cannot run it refuses those
    rows in one line. `service` (service.parse_service) makes it a comparison of
    services."""
    if not applicable:
        raise ArchipelagoError(f"no strategy estimates text generation of {model}; `archi "
                               "compare` ranks generation plans (try `archi plan`)")
    return Request(model, parse_tokens(tokens), parse_devices(devices), parse_counts(counts),
                   parse_strategies(strategies, applicable, every), parse_batches(batches),
                   None if latency_target is None else parse_latency(latency_target),
                   parse_sort(sort, service is not None),
                   () if precision is None else parse_precisions(precision),
                   check_engine(engine), service)


def parse_precisions(text: str) -> tuple[str, ...]:
    """Formats of the shared vocabulary (number_formats.py) in the order given, synonyms
    resolved; one named twice (or by a synonym too) counts once, as a repeated device."""
    return tuple(dict.fromkeys(canonical(item) for item in _items("--precision", text)))
