"""Records the split `--split auto` chooses, and its estimate, for every built-in decoder
and the published configs in tests/data, with lora-q, lora-f and dfx at their default
configs, on 8 to 256 U280s: as rings of 8 at 128:128 tokens one at a time, and as one ring
(every divisor a degree) at 1024:1024 sixteen at a time (KV caches that need more stages).
tests/test_split_scale.py checks today's search against the file this wrote from the
commit before the search pruned (issue 36 point 2); rerun it only to record a deliberate
change of the choice.

    python -m benchmarks.record_auto_splits [OUT.json]
"""

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from archipelago.api import plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.models.zoo import model_names

DATA = Path(__file__).parent.parent / "tests" / "data"
FIXTURE = DATA / "auto_splits.json"
CONFIGS = ("llama-2-13b", "llama-2-70b", "mixtral-8x7b", "qwen2-moe")
STRATEGIES = ("lora-q", "lora-f", "dfx")
BOARDS = (8, 16, 32, 64, 128, 256)
# (cluster of N boards, workload): rings of 8 at batch 1, one ring at batch 16
SHAPES = (("{rings}x8xu280", {"tokens": "128:128"}),
          ("{boards}xu280", {"tokens": "1024:1024", "batch": "16"}))


def models() -> dict[str, str]:
    """Name -> what `plan_and_estimate` takes: zoo names, then config files."""
    found = {name: name for name in model_names()}
    found.update({name: str(DATA / name / "config.json") for name in CONFIGS})
    return found


def cases() -> list[tuple[str, str, str, dict[str, str]]]:
    """(model, cluster, strategy, workload) of every recorded choice."""
    return [(model, shape.format(rings=boards // 8, boards=boards), strategy, work)
            for model in models() for strategy in STRATEGIES for boards in BOARDS
            for shape, work in SHAPES]


def key(model: str, cluster: str, strategy: str, work: dict[str, str]) -> str:
    return f"{model} {cluster} {strategy} {work['tokens']} batch {work.get('batch', '1')}"


def digest(texts: list[str]) -> str:
    """A short fingerprint of every line of `texts`, in order (the file stays small)."""
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def choice(model: str, cluster: str, strategy: str, work: dict[str, str]) -> dict[str, Any]:
    """The chosen split, why other degrees were refused, and its estimate (floats as
    JSON keeps them: exactly; the refusals' text as its first line and a fingerprint of
    all); or the one-line refusal."""
    try:
        plan, _, est = plan_and_estimate(models()[model], cluster, strategy,
                                         {**work, "split": "auto"})
    except ArchipelagoError as err:
        return {"refused": str(err)[:60], "refused_sha": digest([str(err)])}
    split = plan.split
    return {"tp": split.tp, "pp": split.pp, "layers": list(split.layers or ()),
            "ep": split.ep, "refused_tp": sorted(plan.refused),
            "refused_sha": digest(list(plan.refused.values())),
            "latency_s": est.latency_s, "tokens_per_s": est.tokens_per_s,
            "reasons": len(est.reasons), "first_reason": est.reasons[0] if est.reasons else "",
            "reasons_sha": digest(list(est.reasons))}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE
    recorded = {key(*case): choice(*case) for case in cases()}
    lines = (f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in recorded.items())
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # a choice a line
    print(f"{len(recorded)} choices written to {out}")


if __name__ == "__main__":
    main()
