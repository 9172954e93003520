"""Reading a config file (issue 32 point 1: under 50 ms the second time): each config read
by `spec_from_config_file` in a fresh process, first with an empty cache (torch and
transformers imported, the model built on the meta device and mapped), then again (the
cached read: neither imported), beside today's hand reader alone (no check against
transformers) for the same config where its family has one, also in a fresh process. The
clock starts once the reader's own modules are imported; the family modules load inside
it, as on any first read.

    python -m benchmarks.bench_models
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from archipelago.models.model_families import model_families
from benchmarks.model_sweep import default_config

# A hand family (checked against transformers on first read) and introspected ones.
CASES = ("llama", "mixtral", "olmoe", "deepseek_v3", "gemma3_text")
HAND = "archipelago.models.hf_families."
# argv: the checkpoint directory, then "hand" (today's reader alone) or "full".
_TIMED = """
import json, sys, time
from pathlib import Path
from archipelago.models.hf_config import spec_from_config_file, spec_from_hf_config
from archipelago.safe_read import load_json
start = time.perf_counter()
if sys.argv[2] == "hand":
    config = load_json(Path(sys.argv[1]) / "config.json", "config.json")
    spec_from_hf_config(config, "x", "config.json", verify=False)
else:
    spec_from_config_file(Path(sys.argv[1]))
print(json.dumps([time.perf_counter() - start, "torch" in sys.modules]))
"""


def read_in_a_fresh_process(folder: Path, cache: Path, how: str) -> tuple[float, bool]:
    """Seconds the read takes, and whether torch was imported."""
    env = {**os.environ, "ARCHIPELAGO_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _TIMED, str(folder), how],
                         capture_output=True, text=True, check=True, env=env)
    seconds, torch = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, torch


def is_hand_read(model_type: str) -> bool:
    family = model_families().get(model_type)
    return family is not None and family.reader.__module__.startswith(HAND)


def main() -> None:
    print(f"{'model_type':<14}{'hand reader':>13}{'first read':>13}{'second read':>13}"
          "  torch imported (first, second)")
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in CASES:
            folder = Path(tmp) / model_type
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(default_config(model_type)))
            cache = Path(tmp) / f"cache-{model_type}"
            hand = (f"{read_in_a_fresh_process(folder, cache, 'hand')[0] * 1e3:.1f} ms"
                    if is_hand_read(model_type) else "-")
            first, torch_first = read_in_a_fresh_process(folder, cache, "full")
            second, torch_second = read_in_a_fresh_process(folder, cache, "full")
            print(f"{model_type:<14}{hand:>13}{first * 1e3:>10.0f} ms{second * 1e3:>10.1f} ms"
                  f"  {torch_first}, {torch_second}")


if __name__ == "__main__":
    main()
