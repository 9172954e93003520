"""A headless Chromium driven over the DevTools protocol (websocket-client): open report
pages one after another in one browser, read what they drew, and take screenshots.

What a page reports comes from two independent places: the page's own error collector
(`window.__errors`) and the browser's `Runtime.exceptionThrown` events, which catch errors
the collector could miss (a script that fails before it is installed)."""

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import websocket

# The pages the note shows: name -> (model, cluster, strategy).
PAGES = {
    "dfx": ("gpt2-1.5b", "4xu280", "dfx"),
    "lora-q": ("gpt2-345m", "1xu280", "lora-q"),
    "galapagos": ("ibert-base", "72xsidewinder", "galapagos"),
    "persistent": ("nmt-luong", "8xs10-2800", "persistent"),
    "chef": ("vfs", "hacc", "chef"),
    "gpu-graph": ("llama2-7b", "4xh100", "gpu-graph"),
}

# In the page: its errors, its headline figures, and per chart what plotly drew.
_READ_PAGE = """JSON.stringify({
  errors: window.__errors || ['no error collector'],
  rendered: document.body.dataset.rendered || null,
  headline: [...document.querySelectorAll('#headline .figure')].map(e => ({
    key: e.dataset.key, value: JSON.parse(e.dataset.value), scale: +e.dataset.scale,
    shown: e.querySelector('.value').textContent})),
  charts: [...document.querySelectorAll('div.plot')].map(d => ({
    id: d.id, svg: d.querySelectorAll('svg.main-svg').length,
    height: d.getBoundingClientRect().height,
    marks: d.querySelectorAll('.trace path, .trace .point, .trace text, .hm image')
      .length,
    xtitle: (d.querySelector('.g-xtitle') || {}).textContent || '',
    ytitle: (d.querySelector('.g-ytitle') || {}).textContent || ''}))
})"""


# In the page: the chart of a title, as plotly holds it after drawing (typed arrays as lists).
_READ_CHART = """(() => {
  const list = v => v == null ? null : (typeof v === 'object' && v.length !== undefined
                                         ? Array.from(v, list) : v);
  const box = [...document.querySelectorAll('section.chart')]
    .find(s => s.querySelector('h2').textContent === %s);
  const d = box.querySelector('div.plot');
  const axis = a => ({type: a.type, range: list(a.range)});
  return JSON.stringify({
    data: d._fullData.map(t => ({name: t.name, x: list(t.x), y: list(t.y), base: list(t.base),
                                 text: list(t.text), customdata: list(t.customdata)})),
    xaxis: axis(d._fullLayout.xaxis), yaxis: axis(d._fullLayout.yaxis)});
})()"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageState:
    errors: list[str]
    exceptions: list[str]
    rendered: int | None
    headline: list[dict[str, Any]]
    charts: list[dict[str, Any]]
    open_s: float


class Chromium:
    """One headless browser process and a websocket to its first tab."""

    def __init__(self, executable: str, width: int = 1200, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="archi-chromium-")
        self._proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-port=0", "--remote-allow-origins=*", "--no-first-run",
             f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}",
             "--disable-breakpad", "about:blank"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)  # its own process group
        port = self._port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            tab = next(t for t in json.load(r) if t["type"] == "page")
        self._ws = websocket.create_connection(tab["webSocketDebuggerUrl"], timeout=30,
                                               suppress_origin=True)
        self._next_id, self._events = 0, []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _port(self) -> int:
        marker = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if marker.exists() and (text := marker.read_text().split()):
                return int(text[0])
            if self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self._proc.returncode}")
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port in 30 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def open(self, page: Path, timeout_s: float = 30.0) -> PageState:
        """Navigate to `page` and wait until its charts say they are drawn (or time out);
        `open_s` is the wall time from navigation to drawn."""
        self._events.clear()
        started = time.perf_counter()
        self.call("Page.navigate", url=page.resolve().as_uri())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.evaluate("document.readyState === 'complete' && "
                                  "(document.body.dataset.rendered || "
                                  "(window.__errors || []).length > 0)")
            if state:
                break
            time.sleep(0.02)
        open_s = time.perf_counter() - started
        data = json.loads(self.evaluate(_READ_PAGE))
        exceptions = [e["params"]["exceptionDetails"].get("exception", {}).get(
            "description", e["params"]["exceptionDetails"]["text"])
            for e in self._events if e.get("method") == "Runtime.exceptionThrown"]
        rendered = data["rendered"]
        return PageState(data["errors"], exceptions, None if rendered is None else int(rendered),
                         data["headline"], data["charts"], open_s)

    def chart(self, title: str) -> dict[str, Any]:
        """What plotly drew in the chart titled `title`: each trace's name and data as
        plain lists, and each axis's type and range."""
        return json.loads(self.evaluate(_READ_CHART % json.dumps(title)))

    def click(self, selector: str, index: int = 0) -> None:
        """A real mouse click (pressed, released) at the middle of the `index`th element
        matching `selector`, as a user's would land."""
        x, y = self.evaluate(
            f"(() => {{ const e = document.querySelectorAll({json.dumps(selector)})[{index}];"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def screenshot(self, out: Path) -> Path:
        """The whole page (not just the window) as a PNG."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"],
                               "height": size["height"], "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))
        return out

    def close(self) -> None:
        """Close the browser and every process it started (renderers, GPU and utility
        processes still write to the profile after the main one exits), then the profile."""
        try:
            self._ws.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            _kill_group(self._proc.pid)
            self._profile.cleanup()

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group `pgid` and wait until none of it is left (a killed process
    writes nothing more, so the profile can then be removed)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def report_and_plan(out: Path, name: str, *args: str) -> tuple[Path, dict[str, Any]]:
    """`archi report ARGS` written to OUT/NAME.html, and `archi plan ARGS --json`'s object:
    the page a browser test opens and the numbers it checks the page against."""
    from typer.testing import CliRunner

    from archipelago.cli import app

    page = out / f"{name}.html"
    run = CliRunner().invoke(app, ["report", *args, "--out", str(page)])
    assert run.exit_code == 0, run.output
    plan = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert plan.exit_code == 0, plan.output
    return page, json.loads(plan.output)
