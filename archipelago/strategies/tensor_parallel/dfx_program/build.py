"""DFX's build files (`archi build --strategy dfx`): its engine has an instruction set
(seeds/001 §IV-C), so per core

    core<i>.asm           readable listing, each line naming its layer op
    core<i>.bin           the same instructions, WORD_BITS-bit big-endian words, sections
                          in order prologue, layer, epilogue
and for the cluster
    memory_map.json       every core's HBM/DDR regions, tiling and layer strides
    system_config.json    what the host sends each controller (§V-A), the sections' word
                          ranges and the controller loop
    summary.json          counts, file list

The token counts are the generation workload's default; the host sends its own with each
start signal (§V-A), which changes no instruction.
"""

from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from archipelago.emit.output_dir import OutputDir
from archipelago.estimate.workload import parse_tokens
from archipelago.strategies.tensor_parallel import GENERATION
from archipelago.strategies.tensor_parallel.dfx_program.asm import listing
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    WORD_BITS,
    Compute,
    Op,
    Program,
    to_bytes,
)
from archipelago.strategies.tensor_parallel.dfx_program.layout import MemoryMap, ceil_div
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning.rings import one_ring


def _sections(program: Program) -> dict[str, dict[str, int]]:
    first, out = 0, {}
    for section in program.sections:
        out[section.name] = {"first_word": first, "words": len(section.instrs)}
        first += len(section.instrs)
    return out


def _counts(program: Program) -> dict[str, Any]:
    """Instructions by section and type, and the d x l tiles the layer's Conv1Ds stream."""
    c = program.config
    tiles = sum(ceil_div(i.rows, c.d) * ceil_div(i.cols, c.l) for i in program.layer.instrs
                if isinstance(i, Compute) and i.op == Op.CONV1D)
    return {"instructions": {s.name: dict(Counter(type(i).__name__.lower() for i in s.instrs))
                             for s in program.sections},
            "conv1d_tiles_per_layer": tiles}


def system_config(program: Program) -> dict[str, Any]:
    c = program.config
    return {**asdict(c), "sections": _sections(program),
            "loop": {"tokens": len(program.tokens()), "layer_repeats": c.layers,
                     "epilogue_from_token": c.input_tokens - 1}}


def write_programs(plan: Any, out: Path | str, force: bool = False) -> dict[str, Any]:
    """Compile and write every core's program under `out`; returns the summary."""
    ring: Plan = one_ring(plan, "a program build")
    tokens = parse_tokens(GENERATION.texts({}, "build")["tokens"])
    programs, maps = compile_plan(ring, tokens.input_tokens, tokens.output_tokens)
    title = f"DFX program for {ring.spec.name} on {ring.cluster.name}"
    with OutputDir(out, force) as target:
        for rank, program in enumerate(programs):
            target.write_text(f"core{rank}.asm",
                              listing(program, f"{title}: core {rank} of {ring.ranks}"))
            target.write_bytes(f"core{rank}.bin",
                               to_bytes([i for s in program.sections for i in s.instrs]))
        target.write_json("memory_map.json", {"cores": [m.as_json() for m in maps]})
        target.write_json("system_config.json",
                          {"word_bits": WORD_BITS, "cores": [system_config(p) for p in programs]})
        summary = _summary(ring, programs, maps, target, tokens.input_tokens,
                           tokens.output_tokens)
        target.write_json("summary.json", summary)
    return summary


def _summary(plan: Plan, programs: list[Program], maps: list[MemoryMap], target: OutputDir,
             input_tokens: int, output_tokens: int) -> dict[str, Any]:
    words = sum(len(s.instrs) for s in programs[0].sections)
    return {
        "headline": (f"{plan.spec.name} on {plan.cluster.name}: {plan.strategy} programs for "
                     f"{plan.ranks} core{'s' if plan.ranks > 1 else ''} ({words:,} "
                     f"instructions, {_counts(programs[0])['conv1d_tiles_per_layer']:,} Conv1D "
                     "tiles a layer on core 0)"),
        "model": plan.spec.name, "hardware": plan.cluster.name, "strategy": plan.strategy,
        "cores": plan.ranks, "tokens": f"{input_tokens}:{output_tokens}",
        "word_bits": WORD_BITS,
        "per_core": [{"core": p.config.core_id, **_counts(p),
                      "hbm_bytes": m.used["hbm"], "ddr_bytes": m.used["ddr"]}
                     for p, m in zip(programs, maps, strict=True)],
        "files": [*target.written, "summary.json"],
        "out": str(target.root),
    }
