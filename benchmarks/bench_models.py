"""Reading a config file (issue 32 point 1: under 50 ms the second time): each config read
by `spec_from_config_file` in a fresh process, first with an empty cache (torch and
transformers imported, the model built on the meta device and mapped), then again (the
cached read: neither imported), beside today's hand reader alone (no check against
transformers) for the same config where its family has one. Times are of the read itself,
the reader's modules imported before.

    python -m benchmarks.bench_models
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.model_families import model_families
from benchmarks.model_sweep import default_config

# A hand family (checked against transformers on first read) and introspected ones.
CASES = ("llama", "mixtral", "olmoe", "deepseek_v3", "gemma3_text")
HAND = "archipelago.models.hf_families."
_TIMED = """
import json, sys, time
from pathlib import Path
from archipelago.models.hf_config import spec_from_config_file
start = time.perf_counter()
spec_from_config_file(Path(sys.argv[1]))
print(json.dumps([time.perf_counter() - start, "torch" in sys.modules]))
"""


def read_in_a_fresh_process(folder: Path, cache: Path) -> tuple[float, bool]:
    """Seconds the read takes (the reader's own modules imported before), and whether
    torch was imported."""
    env = {**os.environ, "ARCHIPELAGO_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _TIMED, str(folder)], capture_output=True,
                         text=True, check=True, env=env)
    seconds, torch = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, torch


def hand_reader_seconds(config: dict) -> float | None:
    """Today's reader of a built-in family without the transformers check (None: the type
    has no hand reader)."""
    family = model_families().get(config["model_type"])
    if family is None or not family.reader.__module__.startswith(HAND):
        return None
    start = time.perf_counter()
    for _ in range(20):
        spec_from_hf_config(config, "x", "cfg.json", verify=False)
    return (time.perf_counter() - start) / 20


def main() -> None:
    print(f"{'model_type':<14}{'hand reader':>13}{'first read':>13}{'second read':>13}"
          "  torch imported (first, second)")
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in CASES:
            config = default_config(model_type)
            folder = Path(tmp) / model_type
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(config))
            cache = Path(tmp) / f"cache-{model_type}"
            first, torch_first = read_in_a_fresh_process(folder, cache)
            second, torch_second = read_in_a_fresh_process(folder, cache)
            hand = hand_reader_seconds(config)
            shown = "-" if hand is None else f"{hand * 1e3:.1f} ms"
            print(f"{model_type:<14}{shown:>13}{first * 1e3:>10.0f} ms{second * 1e3:>10.1f} ms"
                  f"  {torch_first}, {torch_second}")


if __name__ == "__main__":
    main()
