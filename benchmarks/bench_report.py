"""Report pages for issue #13: for each named plan, the seconds `archi report` takes to
write the page, its size, and how long a headless Chromium takes to open it until every
chart is drawn (a fresh browser per page, warmed on a blank page, so plotly's parse and
compile are counted every time). Screenshots go next to the pages. Prints figures;
nothing here is a pass/fail test.

    python -m benchmarks.bench_report [--out out/report]
"""

import argparse
import time
from pathlib import Path

from typer.testing import CliRunner

from archipelago.cli import app
from tests.browser import PAGES, Chromium, find_chromium


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/report"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    chromium = find_chromium()
    print(f"{'page':<11} {'write s':>8} {'MB':>6} {'open s':>7} {'plotly s':>9}  screenshot")
    for name, (model, cluster, strategy) in PAGES.items():
        page = args.out / f"{name}.html"
        started = time.perf_counter()
        run = CliRunner().invoke(app, ["report", model, "--cluster", cluster, "--strategy",
                                       strategy, "--out", str(page), "--force"])
        written = time.perf_counter() - started
        assert run.exit_code == 0, run.output
        size = page.stat().st_size / 1e6
        if chromium is None:
            print(f"{name:<11} {written:8.2f} {size:6.2f}   (no chromium: `make browser`)")
            continue
        with Chromium(chromium) as browser:
            browser.open(Path("/dev/null"))  # start the renderer before timing
            state = browser.open(page)
            plotly_s = float(browser.evaluate("document.body.dataset.plotlyMs")) / 1e3
            assert state.rendered and not state.errors, state
            shot = browser.screenshot(args.out / f"{name}.png")
        print(f"{name:<11} {written:8.2f} {size:6.2f} {state.open_s:7.2f} {plotly_s:9.2f}  "
              f"{shot}")


if __name__ == "__main__":
    main()
