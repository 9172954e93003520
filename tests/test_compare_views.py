"""The comparison page's extra views read the rows as `comparison_dict` gives them, a
missing figure leaving its row off: throughput per dollar without a price, the served cost
per token only where `compare --rate` put a `serving` object in the row."""

from archipelago.compare.page_views import (
    TARGET_TRACE,
    first_token_chart,
    per_dollar_chart,
    served_cost_chart,
)


def _row(label: str, strategy: str, per_musd: float | None, serving: dict | None = None,
         decode_s: float = 0.002) -> dict:
    row = {"label": label, "strategy": strategy, "tokens_per_s_per_million_usd": per_musd,
           "prefill_s": 0.010, "decode_s_per_token": decode_s}
    return row if serving is None else {**row, "serving": serving}


def _bars(fig) -> dict[str, float]:
    return {x: y for t in fig.data for x, y in zip(t.x, t.y, strict=True)}


def test_per_dollar_bars_leave_unpriced_rows_off_and_put_the_most_first() -> None:
    summary = {"rows": [_row("a 1xu280", "lora-q", 100.0), _row("b 1xv80", "dfx", None),
                        _row("c 2xu280", "lora-q", 300.0)], "latency_target": None}
    fig = per_dollar_chart(summary)
    assert _bars(fig) == {"a 1xu280": 100.0, "c 2xu280": 300.0}
    assert list(fig.layout.xaxis.categoryarray) == ["c 2xu280", "a 1xu280"]
    assert per_dollar_chart({"rows": [_row("b", "dfx", None)]}) is None


def test_served_cost_only_where_rows_carry_it() -> None:
    plain = {"rows": [_row("a", "lora-q", 1.0)], "latency_target": None}
    assert served_cost_chart(plain) is None
    served = {"rows": [_row("a", "lora-q", 1.0, {"replicas": 2, "usd_per_million_tokens": 4.5}),
                       _row("b", "dfx", 1.0, {"replicas": None, "usd_per_million_tokens": None}),
                       _row("c", "dfx", 1.0, {"replicas": 1, "usd_per_million_tokens": 0.5})],
              "latency_target": None}
    fig = served_cost_chart(served)
    assert _bars(fig) == {"a": 4.5, "c": 0.5}
    assert list(fig.layout.xaxis.categoryarray) == ["c", "a"]  # cheapest first


def test_the_target_line_spans_the_rows_with_a_decode_step() -> None:
    rows = [_row("a", "lora-q", 1.0, decode_s=0.001), _row("b", "dfx", 1.0, decode_s=0.004),
            _row("c", "dfx", 1.0, decode_s=0.0)]  # one output token: no step, off log axes
    fig = first_token_chart({"rows": rows, "latency_target": {"seconds": 0.025}})
    (line,) = [t for t in fig.data if t.name == TARGET_TRACE]
    assert list(line.x) == [1.0, 4.0] and list(line.y) == [25.0, 25.0]
    assert not [t for t in first_token_chart({"rows": rows, "latency_target": None}).data
                if t.name == TARGET_TRACE]
