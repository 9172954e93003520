"""Emulate an imported ONNX file split as planned, and check it against onnxruntime.

Each FPGA process runs the ONNX nodes of its layers (the importer's `layer_nodes`, in graph
order) with the torch interpreter of onnx_torch.py, reading only the constants those nodes
read, receiving the values its layers read from the processes that compute them
(`layer_inputs`) and sending the values other layers read (`layer_outputs`). The model's
outputs are compared with onnxruntime running the original file on the same seeded input:
an independent reference, since the interpreter shares no kernel with onnxruntime and the
importer's DAG plays no part in either computation.
"""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
import torch

from archipelago.emulate.errors import EmulationError
from archipelago.errors import elide, elide_path
from archipelago.models.dag import ModelDAG
from archipelago.strategies.chef.emulate.onnx_torch import operator, run_nodes
from archipelago.strategies.chef.emulate.run import (
    LayerRunner,
    Work,
    bytes_by_link,
    run_processes,
)

# FP32 agreement, elementwise as numpy.allclose: |emulated - onnxruntime| <= ATOL + RTOL *
# |onnxruntime|. Both sides round every operation to FP32 (unit roundoff 6e-8) but sum in
# different orders (onnxruntime's MLAS blocks a dot product, fuses Conv+BN+activation,
# computes Gelu and Erf with its own polynomials): a length-n dot product may differ by
# ~n * 6e-8 of the sum of its terms' magnitudes, about 1e-5 relative for the layers of
# these networks (n up to ~2,000), compounding over tens of layers. RTOL leaves a factor of
# ten above that; ATOL covers outputs near zero that are differences of larger terms
# (a LayerNorm's centring, a residual sum). A wrong gate order, pad or axis errs by far
# more than either.
RTOL = 1e-4
ATOL = 1e-5


class Imported(Protocol):
    """What the emulation reads of the importer's OnnxImport."""

    layer_nodes: Mapping[str, tuple[int, ...]]
    layer_inputs: Mapping[str, tuple[str, ...]]
    layer_outputs: Mapping[str, tuple[str, ...]]
    constants: Mapping[str, np.ndarray]


def check_layers(imported: Imported, dag: ModelDAG) -> Imported:
    """`imported`, when its layers are the planned DAG's (the plan placed those names)."""
    if set(imported.layer_nodes) != set(dag.by_name):
        odd = sorted(set(imported.layer_nodes) ^ set(dag.by_name))
        raise EmulationError(f"the import's layers and the planned DAG's differ (first: "
                             f"'{odd[0]}')")
    return imported


def opset_of(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset: which side of each attribute-to-input move it is on."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller feeds (older files list their initializers among the inputs)."""
    weights = {init.name for init in model.graph.initializer}
    return [info for info in model.graph.input if info.name not in weights]


_IDS = {onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def _embedding_rows(model: onnx.ModelProto, name: str) -> int | None:
    """The rows of the smallest embedding table (an initializer Gather reads on axis 0)
    input `name` indexes, if it indexes one: the token ids it may hold."""
    tables = {t.name: t.dims for t in model.graph.initializer}
    rows = [tables[n.input[0]][0] for n in model.graph.node
            if n.op_type == "Gather" and n.input[1] == name and n.input[0] in tables
            and all(a.i == 0 for a in n.attribute if a.name == "axis")]
    return min(rows) if rows else None


def _is_mask(model: onnx.ModelProto, name: str) -> bool:
    """Whether input `name` is read only as booleans (every reader a Cast to BOOL): an
    attention mask, which transformers casts before it indexes it."""
    readers = [n for n in model.graph.node if name in n.input]
    return bool(readers) and all(
        n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.BOOL
                                    for a in n.attribute) for n in readers)


def _padding_mask(dims: list[int], dtype: type) -> np.ndarray:
    """A padding mask as a tokenizer writes one for a shorter sentence: ones, then zeros
    over the last quarter of the positions (at least one)."""
    mask = np.ones(dims, dtype)
    mask[..., dims[-1] - max(dims[-1] // 4, 1):] = 0
    return mask


def seeded_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """A standard-normal FP32 tensor per graph input, from `seed`, in input order; an
    integer input indexing embedding tables (token ids), ids drawn uniformly from the
    rows of the smallest; an integer attention mask, a padding mask (`_padding_mask`); a
    BOOL input, torch's key_padding_mask (True: padding), True over that last quarter
    (read either way, True as kept or as padded, no row is wholly masked)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for info in graph_inputs(model):
        kind = info.type.tensor_type
        rows = _embedding_rows(model, info.name) if kind.elem_type in _IDS else None
        mask = rows is None and kind.elem_type in _IDS and _is_mask(model, info.name)
        dims = [d.dim_value for d in kind.shape.dim]  # all fixed: the import refuses others
        if kind.elem_type == onnx.TensorProto.BOOL:
            out[info.name] = _padding_mask(dims, np.bool_) == 0
            continue
        if kind.elem_type != onnx.TensorProto.FLOAT and rows is None and not mask:
            raise EmulationError(f"input '{info.name}' is of ONNX type "
                                 f"{onnx.TensorProto.DataType.Name(kind.elem_type)}; the "
                                 "emulation feeds seeded FLOAT inputs, and integer ones "
                                 "only as token ids of an embedding table or as an "
                                 "attention mask (cast to booleans)")
        if mask:
            out[info.name] = _padding_mask(dims, _IDS[kind.elem_type])
            continue
        out[info.name] = torch.randn(*dims, generator=gen).numpy() if rows is None else \
            torch.randint(0, rows, dims, generator=gen).numpy().astype(_IDS[kind.elem_type])
    return out


def onnxruntime_outputs(model: Path | bytes,
                        inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The original file's (or serialized model's) outputs, by onnxruntime on the CPU."""
    import onnxruntime

    source = str(model) if isinstance(model, Path) else model
    try:
        session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, inputs), strict=True))
    except Exception as err:  # onnxruntime's own refusal (a kernel it lacks), one line
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        reason = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", reason)
        reason = elide(re.sub(r"/\S+:\d+ \S+\([^)]*\)\s*", "", reason))  # C++ source place
        raise EmulationError(f"onnxruntime, the reference, refuses the model: {reason}") \
            from None


class _Scope(dict):
    """One process's values: what it computed or received, and, on first read, a graph
    input or a constant (so a process holds only the constants its own nodes read)."""

    def __init__(self, constants: Mapping[str, np.ndarray],
                 inputs: Mapping[str, np.ndarray]) -> None:
        super().__init__()
        self.constants, self.inputs = constants, inputs

    def __missing__(self, name: str) -> torch.Tensor:
        source = self.constants if name in self.constants else self.inputs
        tensor = torch.from_numpy(np.array(source[name]))  # a copy torch may write
        self[name] = tensor
        return tensor


def check_reference(reference: Mapping[str, np.ndarray], path: Path,
                    constants: Mapping[str, np.ndarray]) -> None:
    """A reference output that is not finite is the model's fault, not the emulation's: its
    numbers overflow (weights near the format's largest), so nothing can be compared."""
    for name, ref in reference.items():
        if ref.dtype.kind == "f" and not np.isfinite(ref).all():
            held = "NaN" if np.isnan(ref).any() else "infinities"
            largest = max((float(np.abs(c).max()) for c in constants.values()
                           if np.asarray(c).dtype.kind == "f" and np.asarray(c).size),
                          default=0.0)
            raise EmulationError(f"{elide_path(str(path), 80)}: the model's numbers overflow "
                                 f"{ref.dtype}: onnxruntime's own output '{elide(name, 40)}' "
                                 f"holds {held} (largest weight {largest:.3g}; {ref.dtype} "
                                 f"reaches {np.finfo(ref.dtype).max:.3g}), so there is "
                                 "nothing to check the emulation against; scale the weights "
                                 "down")


def compare(outputs: Mapping[str, np.ndarray],
            reference: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Per output and overall: max |difference|, that relative to the output's largest
    magnitude, and whether every element is within RTOL/ATOL."""
    per: dict[str, dict[str, Any]] = {}
    for name, ref in reference.items():
        got = outputs[name]
        if got.shape != ref.shape:
            raise EmulationError(f"output '{name}': the emulation gives shape "
                                 f"{list(got.shape)}, onnxruntime {list(ref.shape)}")
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        err = float(np.abs(got64 - ref64).max()) if ref.size else 0.0
        scale = float(np.abs(ref64).max()) if ref.size else 0.0
        per[name] = {"shape": list(ref.shape), "max_abs_error": err,
                     "max_rel_error": err / scale if scale else err,
                     "passed": bool(np.allclose(got64, ref64, rtol=RTOL, atol=ATOL))}
    passed = all(p["passed"] for p in per.values())
    return {"max_abs_error": max(p["max_abs_error"] for p in per.values()),
            "max_rel_error": max(p["max_rel_error"] for p in per.values()),
            "passed": passed, "agrees": passed, "per_output": per}


def _work(model: onnx.ModelProto, imported: Imported, placement: dict[str, int],
          order: list[str]) -> Work:
    fed = {info.name for info in graph_inputs(model)}
    finals = tuple(o.name for o in model.graph.output)
    written = {v for values in imported.layer_outputs.values() for v in values}
    missing = [v for v in finals if v not in written]
    if missing:
        raise EmulationError(f"graph output '{missing[0]}' is among no layer's outputs")
    reads = {n: tuple(v for v in imported.layer_inputs[n] if v not in fed) for n in order}
    work = Work(placement, order, reads, {n: tuple(imported.layer_outputs[n]) for n in order},
                finals)
    done: set[str] = set()
    for name in order:  # a value read before its producer ran on the same FPGA never comes
        for value in reads[name]:
            if value not in work.producer:
                raise EmulationError(f"layer '{name}' reads '{value}', which no layer writes "
                                     "and is no graph input")
            if work.producer[value] == placement[name] and value not in done:
                raise EmulationError(f"layer '{name}' reads '{value}' before the layer on its "
                                     "FPGA that computes it runs, in the schedule's order")
        done.update(work.writes[name])
    return work


def emulate_onnx(path: Path, imported: Imported, placement: dict[str, int], order: list[str],
                 fpga_names: list[str], seed: int = 0,
                 timeout_s: float = 60.0) -> dict[str, Any]:
    """Run the imported model's layers on one process per FPGA as placed, in `order`
    (each layer after those it reads), and compare with onnxruntime on the same input."""
    model = onnx.load(str(path))
    opset, graph = opset_of(model), model.graph
    inputs = seeded_inputs(model, seed)
    work = _work(model, imported, placement, order)
    for name in order:  # an operator the interpreter lacks is refused before any process
        for index in imported.layer_nodes[name]:
            operator(graph.node[index])

    def make_runner(mine: list[str]) -> LayerRunner:
        scope = _Scope(imported.constants, inputs)
        nodes = {n: [graph.node[i] for i in sorted(imported.layer_nodes[n])] for n in mine}

        def run(name: str, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            scope.update((v, values[v]) for v in work.reads[name])
            run_nodes(nodes[name], scope, opset)
            return {v: scope[v] for v in work.writes[name]}
        return run

    reference = onnxruntime_outputs(path, inputs)  # first: a model that overflows is named
    check_reference(reference, path, imported.constants)
    reports = run_processes(work, make_runner, fpga_names, timeout_s)
    outputs = {v: a for r in reports.values() for v, a in r["outputs"].items()}
    import onnxruntime

    return {
        "model": path.stem, "processes": len(fpga_names),
        "reference": f"onnxruntime {onnxruntime.__version__} (CPU) on {path.name}",
        "seed": seed, "tolerance": {"rtol": RTOL, "atol": ATOL},
        **compare(outputs, reference),
        "outputs": list(work.finals),
        "bytes_per_link": bytes_by_link(reports, fpga_names),
        "layers_per_fpga": {fpga_names[r]: reports[r]["weight_layers"] for r in sorted(reports)},
    }
