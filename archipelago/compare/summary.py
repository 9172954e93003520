"""A comparison as one JSON object (`--json`, and the data of the report page): every row
ranked with its front and target marks, the reasons the other combinations are absent, the
latency target's answer, and the power model and prices the cost and energy rest on."""

from typing import Any

from archipelago.compare.rank import cheapest_meeting
from archipelago.compare.rows import Refusal, Row
from archipelago.compare.run import Comparison
from archipelago.estimate import energy
from archipelago.hardware.catalog import get_device
from archipelago.serving.cost import DEFAULT_ELECTRICITY, DEFAULT_LIFETIME_YEARS

POWER_MODEL = ("every board draws its stated power (a paper's measured average where one "
               "exists, else its datasheet TDP or maximum power) for the whole of each phase: "
               "energy = boards x watts x (prefill + decode time); J per token = energy / "
               "(batch x output tokens); host CPUs, switches and idle time are left out")
COST_MODEL = "upfront cost = boards x the board's price (DFX Table II: accelerators only)"
SERVING_COST = ("$ per million tokens = (boards and their host servers amortized over "
                f"{DEFAULT_LIFETIME_YEARS:g} years + their power x the simulated busy share at "
                f"${DEFAULT_ELECTRICITY:g}/kWh) / (prompt + output tokens per second at the "
                "rate) (serving/cost.py)")


def _refusal(r: Refusal) -> dict[str, Any]:
    return {"strategy": r.strategy, "reason": r.reason, "line": r.line(),
            "combinations": [{"device": d, "count": n, "batch": b,
                              **({} if p is None else {"precision": p})}
                             for d, n, b, p in r.members]}


def _device_facts(devices: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The power model and price of every device compared (None where unknown)."""
    power, prices = {}, {}
    for key in devices:
        device = get_device(key)
        model = energy.board_power(device)
        power[key] = None if model is None else {"watts": model.watts, "basis": model.basis}
        price = energy.board_price(device)
        prices[key] = None if price is None else {"usd": price[0], "source": price[1]}
    return power, prices


def _target(c: Comparison) -> dict[str, Any] | None:
    target = c.request.latency_target_s
    if target is None:
        return None
    best = cheapest_meeting(c.rows, target)
    return {"seconds": target, "meeting": [r.label for r in c.rows if r.latency_s <= target],
            "cheapest": None if best is None else best.label}


def _serving(c: Comparison) -> dict[str, Any] | None:
    """The service asked for, how many rows meet it and the cheapest of those."""
    if c.request.service is None:
        return None
    meeting = [r for r in c.rows if r.serving and r.serving["meets"]]
    priced = [r for r in meeting if r.usd_per_million_tokens is not None]
    cheapest = min(priced, key=lambda r: (r.usd_per_million_tokens, r.label), default=None)
    return {**c.request.service.describe(), "meeting": [r.label for r in meeting],
            "cheapest": None if cheapest is None else cheapest.label,
            "cost_model": SERVING_COST}


def _headline(rows: list[Row], front: list[Row]) -> dict[str, Any]:
    if not rows:
        return {"combinations": 0}
    fastest = min(rows, key=lambda r: r.latency_s)
    return {"combinations": len(rows), "front_size": len(front),
            "fastest_latency_s": fastest.latency_s, "fastest": fastest.label,
            "best_tokens_per_s": max(r.tokens_per_s for r in rows)}


def comparison_dict(c: Comparison) -> dict[str, Any]:
    request, front = c.request, {r.label for r in c.front}
    target = request.latency_target_s
    power, prices = _device_facts(request.devices)
    rows = [{"rank": i + 1, "label": r.label, "front": r.label in front,
             "meets_target": None if target is None else r.latency_s <= target,
             **r.to_dict()} for i, r in enumerate(c.rows)]
    return {
        "model": c.model, "request_model": request.model,
        "tokens": f"{request.tokens.input_tokens}:{request.tokens.output_tokens}",
        "devices": list(request.devices), "counts": list(request.counts),
        "batches": list(request.batches),
        "precision": list(request.precisions) or None,  # None: each strategy's own
        "engine": request.engine,
        "sort": request.sort,
        "strategies": sorted({r.strategy for r in c.rows}),
        "headline": _headline(c.rows, c.front),
        "rows": rows, "front": [r.label for r in c.front], "latency_target": _target(c),
        "serving": _serving(c),
        "not_applicable": c.not_applicable,
        "refused": [_refusal(r) for r in c.refused],
        "infeasible": [_refusal(r) for r in c.infeasible],
        "unknown_cost": sorted({r.device for r in c.rows if r.upfront_usd is None}),
        "unknown_power": sorted({r.device for r in c.rows if r.watts_per_board is None}),
        "power_model": {"statement": POWER_MODEL, "devices": power},
        "cost_model": {"statement": COST_MODEL, "prices": prices},
        "store": str(c.store), "evaluated": len(c.evaluated), "reused": c.reused,
        "evaluated_keys": c.evaluated,
    }


def rows_from_dict(data: dict[str, Any]) -> list[Row]:
    """The rows of a `--json` object, as they were ranked."""
    return [Row.from_dict(r) for r in data["rows"]]
