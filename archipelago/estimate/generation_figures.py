"""The figures every generation estimate (a ring of FPGAs, a pipeline of rings, GPUs)
reports alike, as summary figures: the head table's title, latency, tokens/s, prefill and
decode in the order `--json` gives them, and where the time goes. Each kind adds its own
figures around them."""

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.summary import Column, Figure, Section, Unit, row
from archipelago.estimate.workload import Generation

MS2 = Unit("ms", 1e3, 2)
MS3 = Unit("ms", 1e3, 3)
HEAD = (Column("metric", right=False), Column("value"))


def generation_title(what: str, workload: Generation, feasible: bool) -> str:
    """The head table's title: `what` ("MODEL on CLUSTER · strategy S"), the tokens, the
    batch where there is one, and a warning when the plan does not fit."""
    batch = f" · batch {workload.batch}" if workload.batch > 1 else ""
    hypothetical = "" if feasible else " · figures if it fitted"
    return (f"{what} · {workload.input_tokens}:{workload.output_tokens} tokens{batch}"
            f"{hypothetical}")


def timing_figures(est: GenerationTiming, devices: int) -> list[Figure]:
    """Latency, tokens/s, prefill, decode per token (and how it moves from the first token
    to the last) and the breakdown, in the order every kind gives them."""
    first_last = f"{est.decode_s_first * 1e3:,.3f} → {est.decode_s_last * 1e3:,.3f} ms"
    return [
        Figure("latency_s", est.latency_s, "end-to-end latency", unit=MS2,
               headline="end-to-end latency"),
        Figure("tokens_per_s", est.tokens_per_s, "tokens/s (output / latency)",
               unit=Unit(digits=2), headline="tokens/s"),
        Figure("tokens_per_s_per_device", est.tokens_per_s / devices),
        Figure("time_to_first_token_s", est.prefill_s),
        Figure("time_per_output_token_s", est.decode_s_per_token),
        Figure("prefill_s", est.prefill_s, "prefill (summarization)", unit=MS2,
               headline="prefill"),
        Figure("decode_s_per_token", est.decode_s_per_token, "decode per token (mean)",
               unit=MS3, headline="decode per token (mean)"),
        Figure("decode_s_first", est.decode_s_first),
        Figure("decode_s_last", est.decode_s_last),
        row("decode first → last token", first_last),
        Figure("breakdown_s", est.breakdown_s),
    ]


def time_section(breakdown_s: dict[str, float], latency_s: float,
                 title: str = "where the time goes") -> Section:
    """Each part's milliseconds and share of the latency."""
    return Section(title, (Column("part", right=False), Column("ms"), Column("share")),
                   [(name, f"{seconds * 1e3:,.2f}", f"{100 * seconds / latency_s:.1f}%")
                    for name, seconds in breakdown_s.items()])
