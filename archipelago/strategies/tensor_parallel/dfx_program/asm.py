"""Readable assembly for DFX instructions: one line each, `parse(format(i)) == i`.

    conv1d vrf:0x0, hbm:0x1000 -> vrf:0x400 rows=1024 cols=256 [gelu,layer]
    dma.load hbm:0x1000 -> wbuf:0x0 n=262144 [layer]
    router.send vrf:0x0 -> vrf:0x40 n=256

Text after `;` is a comment.
"""

import re
from dataclasses import fields
from typing import Any

from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    Compute,
    Dma,
    DmaOp,
    EncodingError,
    Flag,
    Instr,
    Loc,
    Op,
    Program,
    Router,
    RouterOp,
)

_MOVERS: dict[str, type[Dma] | type[Router]] = {"dma": Dma, "router": Router}
_MOVER_OPS: dict[str, type[DmaOp] | type[RouterOp]] = {"dma": DmaOp, "router": RouterOp}


def _operand(loc: Loc, address: int) -> str:
    return f"{loc.name.lower()}:{address:#x}"


def _flags(flags: Flag) -> str:
    names = [f.name.lower() for f in Flag if f and f in flags and f.name]
    return f" [{','.join(names)}]" if names else ""


def format_instr(instr: Instr) -> str:
    """One line of assembly."""
    if isinstance(instr, Compute):
        return (f"{instr.op.name.lower()} {_operand(instr.src1_loc, instr.src1)}, "
                f"{_operand(instr.src2_loc, instr.src2)} -> "
                f"{_operand(instr.dst_loc, instr.dst)} rows={instr.rows} cols={instr.cols}"
                f"{_flags(instr.flags)}")
    prefix = "dma" if isinstance(instr, Dma) else "router"
    return (f"{prefix}.{instr.op.name.lower()} {_operand(instr.src_loc, instr.src)} -> "
            f"{_operand(instr.dst_loc, instr.dst)} n={instr.xfer_size}{_flags(instr.flags)}")


_OPND = r"(\w+):(0x[0-9a-f]+)"
_FLAGS = r"(?:\s+\[([\w,]*)\])?"
_COMPUTE = re.compile(rf"(\w+)\s+{_OPND},\s*{_OPND}\s*->\s*{_OPND}\s+rows=(\d+)\s+cols=(\d+)"
                      rf"{_FLAGS}$")
_MOVE = re.compile(rf"(dma|router)\.(\w+)\s+{_OPND}\s*->\s*{_OPND}\s+n=(\d+){_FLAGS}$")


def _enum(table: Any, name: str, what: str) -> Any:
    try:
        return table[name.upper()]
    except KeyError:
        choices = ", ".join(m.name.lower() for m in table if m.name)
        raise EncodingError(f"unknown {what} {name!r}; valid: {choices}") from None


def _parse_flags(text: str | None) -> Flag:
    flags = Flag.NONE
    for name in filter(None, (text or "").split(",")):
        flags |= _enum(Flag, name, "flag")
    return flags


def parse(line: str) -> Instr:
    """Inverse of `format_instr`; a `;` comment is ignored."""
    text = line.split(";", 1)[0].strip().lower()
    if m := _MOVE.match(text):
        prefix, op, sl, sa, dl, da, n, flags = m.groups()
        return _MOVERS[prefix](
            op=_enum(_MOVER_OPS[prefix], op, f"{prefix} op"), src=int(sa, 16), dst=int(da, 16),
            xfer_size=int(n), src_loc=_enum(Loc, sl, "location"),
            dst_loc=_enum(Loc, dl, "location"), flags=_parse_flags(flags))
    if m := _COMPUTE.match(text):
        op, l1, a1, l2, a2, ld, ad, rows, cols, flags = m.groups()
        return Compute(op=_enum(Op, op, "compute op"), src1=int(a1, 16), src2=int(a2, 16),
                       dst=int(ad, 16), rows=int(rows), cols=int(cols),
                       src1_loc=_enum(Loc, l1, "location"), src2_loc=_enum(Loc, l2, "location"),
                       dst_loc=_enum(Loc, ld, "location"), flags=_parse_flags(flags))
    raise EncodingError(f"not a DFX instruction: {line.strip()!r}")


def listing(program: Program, title: str) -> str:
    """The program as an assembly file: the system configuration and the controller loop
    as comments, then one labelled block per section, each line with its note."""
    c = program.config
    lines = [f"; {title}", "; system configuration (§V-A): " + " ".join(
        f"{f.name}={getattr(c, f.name)}" for f in fields(c)),
        f"; controller: for t in 0..{len(program.tokens()) - 1}: prologue; layer x {c.layers} "
        f"(LAYER adds i x stride); epilogue when t >= {c.input_tokens - 1}"]
    width = max((len(format_instr(i)) for s in program.sections for i in s.instrs), default=0)
    for section in program.sections:
        lines.append(f"{section.name}:")
        notes = section.notes or ("",) * len(section.instrs)
        for instr, note in zip(section.instrs, notes, strict=True):
            text = f"    {format_instr(instr):<{width}}"
            lines.append(f"{text}  ; {note}" if note else text.rstrip())
    return "\n".join(lines) + "\n"


def parse_listing(text: str) -> dict[str, list[Instr]]:
    """Instructions of each labelled section of an assembly file (`listing`'s inverse up to
    comments)."""
    sections: dict[str, list[Instr]] = {}
    current: list[Instr] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split(";", 1)[0].strip()
        if not code:
            continue
        if re.fullmatch(r"\w+:", code):
            current = sections.setdefault(code[:-1], [])
        elif current is None:
            raise EncodingError(f"line {number}: an instruction before any section label")
        else:
            current.append(parse(code))
    return sections
