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
