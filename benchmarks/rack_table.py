"""Issue #21's table: today's decoders on racks of U280s, the split chosen automatically.
Llama-2-7B, 13B and 70B (published configs) and a mixture of experts, on 8 to 128 boards
as rings of 8 joined by a 100G switch (`Rx8xu280`), at 128:128 tokens: the split, latency,
tokens/s and bandwidth efficiency of each plan, or the first reason it does not fit.

    python -m benchmarks.rack_table
"""

from pathlib import Path

from archipelago.api import plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.strategies.tensor_parallel.report import summarize

DATA = Path(__file__).parent.parent / "tests" / "data"
MODELS = {"llama-2-7b": "llama2-7b",
          "llama-2-13b": str(DATA / "llama-2-13b" / "config.json"),
          "llama-2-70b": str(DATA / "llama-2-70b" / "config.json")}
MOE = DATA / "mixtral-8x7b" / "config.json"
RINGS = (1, 2, 4, 8, 16)  # x 8 boards
WORK = {"tokens": "128:128"}


def cell(model: str, cluster: str, strategy: str) -> str:
    try:
        plan, work, est = plan_and_estimate(model, cluster, strategy, WORK)
    except ArchipelagoError as err:
        return f"refused: {str(err)[:60]}"
    if not est.feasible:
        return f"does not fit: {est.reasons[0][:70]}"
    split = getattr(est, "split", None)
    experts = f" ep{split.ep}" if split and plan.spec.moe else ""
    where = f"tp{split.tp} pp{split.pp}{experts}" if split else "one ring"
    eff = summarize(plan, work, est).as_json()["bandwidth_efficiency"]
    return (f"{where:11} {est.latency_s:7.3f} s {est.tokens_per_s:7.1f} tok/s "
            f"bw {eff:4.2f}")


def main() -> None:
    models = dict(MODELS)
    if MOE.exists():
        models["mixtral-8x7b"] = str(MOE)
    for name, model in models.items():
        for strategy in ("lora-q", "dfx"):
            for rings in RINGS:
                cluster = f"{rings}x8xu280"
                print(f"{name:13} {strategy:7} {rings * 8:4d} boards  "
                      f"{cell(model, cluster, strategy)}")


if __name__ == "__main__":
    main()
