"""`archi build --strategy persistent`: the application as seeds/003 writes it. Under --out:

    host/main.cpp           the plan's application, one Table I API call a line
    host/archi_api.h        the API it calls
    host/archi_api_ref.cpp  a reference API running the NPU overlay functionally on the CPU
    host/data/              the host's tensors (embeddings, inputs) and the source sentence
    cards/cardK/programs/   the overlay programs `fpga_pgm` loads onto card K
    cards/cardK/mrfs/       the INT8 weight blocks card K holds in its MRFs
    manifest.json           blocks, programs and bytes per card; the call counts
    README.md               how to compile and run it

The program is written by walking the same application code the plan recorded (its calls
are checked against the plan's Program); the weights are the emulation's, seeded alike and
quantized by the same function, so the compiled program reproduces `archi emulate`.
"""

import struct
from importlib import resources
from typing import Any

import numpy as np

from archipelago.emit.output_dir import OutputDir
from archipelago.errors import ArchipelagoError
from archipelago.models.recurrent import NMTSpec
from archipelago.strategies.host_offload.apps import run_app
from archipelago.strategies.host_offload.emit.cpp_writer import CppWriter, Expr
from archipelago.strategies.host_offload.emulate.weights import (
    card_block,
    make_source,
    make_weights,
)
from archipelago.strategies.host_offload.plan import HostPlan, host_shapes
from archipelago.strategies.host_offload.program import OverlayProgram

SEED = 0  # `archi emulate`'s default seed: the build's weights are that emulation's
API_FILES = ("archi_api.h", "archi_api_ref.cpp")
# The API's arithmetic optimized but without fused multiply-adds (the emulation's FP32
# rounding); main.cpp is the plan's calls unrolled, with no arithmetic of its own but the
# beam scores' double additions, so unoptimized: the default nmt-luong's 11,400 lines take
# 8 s at -O0 and over 5 CPU-minutes at -O1 (measured). -fno-exceptions: the API throws none.
COMPILE = ("g++ -std=c++17 -O2 -ffp-contract=off -fno-exceptions -c host/archi_api_ref.cpp && "
           "g++ -std=c++17 -O0 -fno-exceptions -o app host/main.cpp archi_api_ref.o")


def write_program(plan: HostPlan, source: list[int]) -> tuple[str, int]:
    """main.cpp of the plan's application and its line count. The writer walks the app as
    the Recorder did; a program whose calls differ from the plan's is never written."""
    writer = CppWriter(plan.layout, host_shapes(plan.spec, plan.steps))
    words: list[Any] = []
    if isinstance(plan.spec, NMTSpec):
        writer.lines.append(f"Idx source = host_tokens(\"source\");  // {len(source)} words")
        words = [Expr(f"source[{i}]") for i in range(len(source))]
    result = run_app(writer, plan.spec, plan.layout, plan.steps, words or None)
    done = writer.trace.program
    if done.setup != plan.program.setup or done.calls != plan.program.calls:
        raise ArchipelagoError(f"the written program of {plan.spec.name} differs from its "
                               "plan's calls")
    for name, value in (result.items() if isinstance(result, dict) else [("outputs", result)]):
        writer.output(name, value)
    head = (f"// {plan.spec.name} on {plan.cards} card(s) of {plan.cluster.name}, strategy "
            f"persistent (seeds/003): written by `archi build`.\n"
            f"// {len(plan.program.setup)} setup calls, then {len(plan.program.calls)} calls "
            f"per inference ({plan.steps} steps).\n"
            "#include \"archi_api.h\"\n\nusing namespace archi;\n\n"
            "int main(int argc, char** argv) {\n"
            "  // argv[1]: the build directory (default: the working directory)\n"
            f"  host_open(argc > 1 ? argv[1] : \".\", {plan.cards});\n")
    body = "".join(f"  {line}\n" if line else "\n" for line in writer.lines)
    return head + body + "  return 0;\n}\n", len(writer.lines)


def overlay_text(program: OverlayProgram) -> str:
    """What `fpga_pgm` loads: a header, then one instruction a line (op, length, cols)."""
    lines = [f"program {program.name} {program.kind} {program.in_len} {program.out_len}"]
    lines += [f"{i.op} {i.length} {i.cols}" for i in program.instrs]
    return "\n".join(lines) + "\n"


def mrf_bytes(segments: list[tuple[np.ndarray, np.ndarray]], bias: np.ndarray | None) -> bytes:
    """A weight block as `fpga_ld_mrfs` reads it: 'AMRF', rows, matvecs, has-bias (int32
    little-endian), then per matvec its cols, INT8 rows x cols, FP32 row scales; the bias."""
    rows = segments[0][0].shape[0]
    parts = [b"AMRF", struct.pack("<3i", rows, len(segments), bias is not None)]
    for q, scale in segments:
        parts += [struct.pack("<i", q.shape[1]), q.astype("<i1").tobytes(),
                  scale.astype("<f4").tobytes()]
    if bias is not None:
        parts.append(bias.astype("<f4").tobytes())
    return b"".join(parts)


def tensor_bytes(array: np.ndarray) -> bytes:
    """A host tensor: 'AHST', rows, cols (0 for a vector; int32), FP32 row-major."""
    rows, cols = (array.shape[0], array.shape[1] if array.ndim == 2 else 0)
    return b"AHST" + struct.pack("<2i", rows, cols) + array.astype("<f4").tobytes()


def _readme(plan: HostPlan) -> str:
    return (f"# {plan.spec.name} on {plan.cards} x FPGA card, strategy persistent\n\n"
            "The application of seeds/003 written with its Table I API (`host/main.cpp`), "
            "the overlay program\nand INT8 weight blocks of every card (`cards/`), the "
            "host's tensors (`host/data/`).\n`host/archi_api_ref.cpp` runs the NPU overlay "
            "functionally on the CPU; a deployment links\nits cards' runtime instead.\n\n"
            f"```sh\n{COMPILE}\n./app .   # prints the outputs, one per line\n```\n\n"
            f"Weights are seeded as `archi emulate --seed {SEED}` seeds them, so the "
            "outputs equal that emulation's.\n")


def write_build(plan: HostPlan, out: str, force: bool) -> dict[str, Any]:
    """The host program, its API, the cards' programs and weights, under `out`."""
    weights, biases, host = make_weights(plan.spec, SEED, plan.steps)
    source = make_source(plan.spec, SEED, plan.steps)
    main, lines = write_program(plan, source)
    api = resources.files(__package__) / "cpp"
    cards = []
    with OutputDir(out, force) as target:
        target.write_text("host/main.cpp", main)
        for name in API_FILES:
            target.write_text(f"host/{name}", (api / name).read_text())
        for name, array in host.items():
            target.write_bytes(f"host/data/{name}.bin", tensor_bytes(array))
        if isinstance(plan.spec, NMTSpec):
            target.write_text("host/data/source.txt", " ".join(map(str, source)) + "\n")
        for card in range(plan.cards):
            blocks = []
            for block in plan.layout.card_blocks(card):
                segments, _, bias = card_block(plan.layout, block, weights, biases)
                target.write_text(f"cards/card{card}/programs/{block.name}.ovl",
                                  overlay_text(plan.layout.program(block)))
                target.write_bytes(f"cards/card{card}/mrfs/{block.name}.bin",
                                   mrf_bytes(segments, bias))
                blocks.append({"block": block.name, "matrix": block.matrix,
                               "rows": [list(r) for r in block.rows], "cols": list(block.cols),
                               "int8_bytes": sum(q.nbytes for q, _ in segments)})
            cards.append({"card": card, "device": plan.cluster.devices[card].key,
                          "blocks": blocks, "onchip_bytes": plan.card_weight_bytes(card)})
        manifest = {"model": plan.spec.name, "cluster": plan.cluster.name, "seed": SEED,
                    "steps": plan.steps, "weights": plan.layout.weights,
                    "setup_calls": len(plan.program.setup),
                    "calls_per_inference": len(plan.program.calls), "program_lines": lines,
                    "cards": cards, "compile": COMPILE}
        target.write_json("manifest.json", manifest)
        target.write_text("README.md", _readme(plan))
    return {"model": plan.spec.name, "hardware": plan.cluster.name, "cards": plan.cards,
            "calls": len(plan.program.calls), "program_lines": lines, "out": str(target.root),
            "files": sorted(target.written)}
