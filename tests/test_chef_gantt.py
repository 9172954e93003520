"""Gantt charts of CHEF schedules (plotly HTML)."""

import pytest

pytest.importorskip("plotly")

from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.gantt import write_gantt
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef


def test_gantt_has_every_layer_and_never_overwrites(tmp_path):
    dag = builtin_dag("cnn-lstm")
    plan = plan_chef(dag, resolve_cluster("hacc"), ChefConfig()).to_dict()
    modality = {la.name: la.modality for la in dag.layers}
    path = write_gantt(plan, modality, tmp_path / "g.html")
    html = path.read_text()
    assert all(f'"{la.name}"' in html for la in dag.layers)
    # An existing file is refused where --gantt is parsed, before any search runs.
    from archipelago.api import parse_workload

    with pytest.raises(ArchipelagoError, match=r"g\.html exists; choose a new name"):
        parse_workload("chef", {"gantt": str(path)})
    assert path.read_text() == html


def test_gantt_colours_a_multi_model_dag_by_model_like_the_page(tmp_path):
    """`--gantt` groups the bars as the report page does: two models no data flows between
    get a bar trace each, named by model, every layer in its own model's trace."""
    import json
    import re

    from typer.testing import CliRunner

    from archipelago.cli import app
    from tests.test_report_browser_dense import TWO_MODELS

    model, gantt = tmp_path / "two.yaml", tmp_path / "g.html"
    model.write_text(TWO_MODELS)
    run = CliRunner().invoke(app, ["plan", str(model), "--cluster", "chef-cluster1",
                                   "--strategy", "chef", "--gantt", str(gantt), "--json"])
    assert run.exit_code == 0, run.output
    mapped = {m["layer"] for m in json.loads(run.output)["mapping"]}
    html = gantt.read_text()
    data = json.loads(re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', html,
                                re.S).group(1))
    traces = {t["name"]: set(t["text"]) for t in data}
    assert traces == {"cam": {n for n in mapped if n.startswith("cam_")},
                      "kws": {n for n in mapped if n.startswith("kws_")}}
    assert '"legend":{"title":{"text":"model"}}' in html.replace(" ", "")
