"""ONNX import speed (issue #24 *Speed*: importing and planning a resnet50-sized CNN on
HACC under 2 s end to end): each of the onnx package's nine light models imported (check,
fold, form layers), the nine together, and resnet50 imported then planned by CHEF and H2H
on HACC, next to the built-in 141-layer VLocNet planned the same way.

    python -m benchmarks.bench_onnx_import
"""

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.models.onnx_import import import_onnx
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef, plan_h2h
from benchmarks.bench_chef import best_of

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def stored_weights(path: Path, out: Path) -> Path:
    """`path` with each ConstantOfShape weight stored as a seeded random initializer, as
    a real export stores them (resnet50: ~100 MB to read, check and convert)."""
    model = onnx.load(str(path))
    graph, rng = model.graph, np.random.default_rng(0)
    shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            dims = [int(d) for d in shapes[node.input[0]]]
            graph.initializer.append(numpy_helper.from_array(
                rng.standard_normal(dims).astype(np.float32) * 0.01, node.output[0]))
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    model.ir_version = 4  # initializers need not be listed as graph inputs from IR 4
    onnx.save(model, str(out))
    return out


def main() -> None:
    files = sorted(LIGHT.glob("light_*.onnx"))
    print(f"{'model':22} {'import':>9} {'layers':>7} {'GMACs':>7} {'folded':>7}")
    for path in files:
        seconds, _, imported = best_of(3, lambda p=path: import_onnx(p))
        dag = imported.dag
        macs = sum(getattr(la, "macs", 0) for la in dag.layers)
        print(f"{path.stem.removeprefix('light_'):22} {seconds * 1e3:6.1f} ms "
              f"{len(dag.layers):7} {macs / 1e9:7.2f} {sum(dag.folded.values()):7}")
    seconds, _, _ = best_of(3, lambda: [import_onnx(p) for p in files])
    print(f"all {len(files)} imported: {seconds:.3f} s")
    hacc = resolve_cluster("hacc")
    folder = tempfile.TemporaryDirectory()
    stored = stored_weights(LIGHT / "light_resnet50.onnx", Path(folder.name) / "r50.onnx")
    print(f"resnet50 with its weights stored: {stored.stat().st_size / 1e6:.0f} MB")
    for name, load in (("resnet50 (ONNX)", lambda: import_onnx(LIGHT / "light_resnet50.onnx")
                        .dag), ("resnet50 (stored)", lambda: import_onnx(stored).dag),
                       ("vlocnet (built in)", lambda: builtin_dag("vlocnet"))):
        for strategy, planner in (("chef", plan_chef), ("h2h", plan_h2h)):
            seconds, _, plan = best_of(3, lambda ld=load, pl=planner: pl(ld(), hacc,
                                                                      ChefConfig()))
            print(f"{name:20} load + {strategy:4} on hacc: {seconds:.3f} s "
                  f"(target < 2 s), latency {plan.latency_s * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
