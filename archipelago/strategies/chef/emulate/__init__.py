"""Emulation of scheduled DAGs (CHEF, H2H): see run.py, and onnx_run.py for an imported
ONNX file, which is checked against onnxruntime running the file itself."""

from pathlib import Path
from typing import Any


def _onnx_file(model: str | None) -> Path | None:
    """The ONNX file the plan's DAG was imported from: the onnx model family's own test
    (a `.onnx` name, models/onnx_import.py), on an existing file."""
    if model is None or Path(model).suffix != ".onnx" or not Path(model).is_file():
        return None
    return Path(model)


def emulate_plan(plan, job) -> dict[str, Any]:
    """The plan kind's emulator hook: the schedule's placement and order, run for real:
    an imported ONNX file's own nodes against onnxruntime, else the DAG's layers with
    seeded weights against the unsplit DAG."""
    from archipelago.strategies.chef.emulate.run import emulate_dag

    placement = plan.placement()
    start = dict(zip(plan.tables.names, plan.schedule.start, strict=True))
    order = sorted(placement, key=lambda name: (start[name], plan.dag.order.index(name)))
    fpgas = [f.name for f in plan.cluster.nodes]
    source = _onnx_file(job.model)
    if source is not None:
        from archipelago.models.onnx_import import import_onnx
        from archipelago.strategies.chef.emulate.onnx_run import check_layers, emulate_onnx

        imported = check_layers(import_onnx(source), plan.dag)
        report = emulate_onnx(source, imported, placement, order, fpgas, job.seed,
                              job.timeout_s)
    else:
        report = emulate_dag(plan.dag, placement, order, fpgas, job.seed, job.timeout_s)
    return {"strategy": plan.strategy, "cluster": plan.cluster.name, **report}
