"""examples/sizing.ipynb runs top to bottom (issue 38 point 1), on a kernel of this
interpreter (a kernel spec written for the test, so a fresh clone needs no `ipykernel
install`), in an empty directory it leaves empty; its committed copy holds no outputs."""

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parent.parent / "examples" / "sizing.ipynb"
KERNEL = "archipelago-test"


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch) -> str:
    """A kernel spec running this interpreter (the venv's), found first on JUPYTER_PATH."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "archipelago (test)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(
        [str(tmp_path / "jupyter"), *filter(None, [os.environ.get("JUPYTER_PATH")])]))
    return KERNEL


def test_the_committed_notebook_holds_no_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_notebook_runs_and_answers_each_question(kernel: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, kernel_name=kernel, timeout=600,
                   resources={"metadata": {"path": str(work)}}).execute()
    outputs = [c.outputs for c in notebook.cells if c.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in out) for out in outputs)
    text = [" ".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for o in out) for out in outputs]
    assert "ms for 64 tokens" in text[1] and "4 boards" in text[1]
    assert "tokens_per_s" in text[2] and "16" in text[2]  # the sweep's table
    assert "rank" in text[3] and "lora-q" in text[3]  # the comparison's table
    chart = outputs[4][0]["data"]
    assert "application/vnd.plotly.v1+json" in chart
    assert chart["application/vnd.plotly.v1+json"]["layout"]["xaxis"]["title"]["text"] == \
        "upfront $"
    assert os.listdir(work) == []
