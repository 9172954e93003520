"""`archi report` against ring size (issue 39 point 5): a DFX ring of 64, 512 and 4096 U280s
running a two-layer GPT-2 config whose heads equal the ring (each device holds one head),
each page written in a fresh process (peak memory: the largest child so far, so counts
run smallest first). Prints seconds, peak
resident memory and the page's size; nothing here is a pass/fail test. Before the page's
bounds, 128 boards took 214 s (the timing simulator's layer) and 4096 ran past 300 s at 9 GB.

    python -m benchmarks.bench_report_scale [COUNT ...]
"""

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COUNTS = (64, 512, 4096)
ROOT = Path(__file__).resolve().parents[1]


def config(heads: int) -> dict:
    """A GPT-2 config with `heads` heads of width 2, so `heads` boards split it evenly."""
    return {"model_type": "gpt2", "n_embd": 2 * heads, "n_head": heads, "n_layer": 2,
            "n_inner": 8 * heads, "vocab_size": 50257, "n_positions": 1024}


def write_page(count: int, where: Path) -> tuple[float, float, float]:
    """Seconds, peak resident MB and page MB of one `archi report` of a ring of `count`."""
    model = where / f"m{count}" / "config.json"
    model.parent.mkdir()
    model.write_text(json.dumps(config(count)))
    page = where / f"ring{count}.html"
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "archipelago", "report", str(model),
                          "--cluster", f"{count}xu280", "--out", str(page)],
                         capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"{count} boards: {run.stderr or run.stdout}")
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3  # KB on Linux
    return seconds, peak_mb, page.stat().st_size / 1e6


def main(argv: list[str]) -> None:
    counts = [int(a) for a in argv] or list(COUNTS)
    print(f"{'boards':>7} {'seconds':>8} {'peak MB':>8} {'page MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for count in counts:
            seconds, peak, size = write_page(count, Path(tmp))
            print(f"{count:>7} {seconds:8.2f} {peak:8.0f} {size:8.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
