"""The DFX instruction set (seeds/001 §IV-C, §V) and the Program a core runs.

Three instruction types (§IV-C): `compute` (type, src1, src2, dst) "with additional bits to
determine if the source or destination location is off-chip memory or on-chip register
file", and `dma` / `router` (type, src, dst, xfer_size). The paper gives the formats but no
field widths; every width below is derived from what the field must address and says so.

Program semantics (what the timing and functional simulators execute)
---------------------------------------------------------------------
Units: on-chip addresses (VRF, SRF, DMA and router buffers) count FP16 elements; off-chip
addresses (HBM, DDR) count bytes; `rows`, `cols` and `xfer_size` count FP16 elements
(token IDs are stored as 16-bit words, GPT-2's 50257-word vocabulary fits).

HBM addresses are the DMA's striped view (§V-B: "connected to all 32 HBM channels ... 32 x
512 bits per cycle"): byte `a` lies in channel `(a // 64) % 32` at channel offset
`(a // (64 * 32)) * 64 + a % 64` (see layout.py), so one 2 KiB beat of the stream is one
d x l FP16 tile at d = 64, l = 16.

Controller loop (§V-A: "the number of decoder layers determines when single token processing
completes, and the number of input and output tokens determines when the entire service
completes"): for token t = 0 .. input_tokens + output_tokens - 2 the core runs `prologue`
(embedding), then `layer` once per decoder layer i = 0 .. layers - 1, then `epilogue`
(final LayerNorm, LM head, argmax, token store) when t >= input_tokens - 1 (a generated
token; earlier tokens' next tokens are the prompt's own). Address modifiers:
  - flag LAYER: an HBM address += i * SystemConfig.layer_stride, a DDR address += i *
    SystemConfig.ddr_layer_stride (§V-A: "the layer number designates the address the DMA
    needs to access");
  - flag TOKEN on a dma: the off-chip operand is token t's row (a token ID, a WPE row:
    address += t * 2 * xfer_size; a store from the SRF: the token buffer's row t), or, a
    dma store from the VRF into a KV cache matrix (K^T of
    xfer_size x max_context, V of max_context x xfer_size, tiled: layout.py), token t's
    column of K^T (the lane's d-value runs, §V-B "the write is row-wise"), or with
    TRANSPOSE token t's row of V (through the transpose unit, §V-B);
    `Tiling.token_offsets` gives the bytes;
  - flag INDEX on a dma: off-chip address += SRF[RMAX_REG] * 2 * xfer_size (the WTE row
    of the token ID held in the reduce-max register);
  - flag CONTEXT on a compute: the dimension given as 0 is the context length t + 1
    (§V-A: "the token number is used specifically for knowing where to mask"); on a dma,
    xfer_size counts elements per context token (the K^T or V tiles of tokens 0..t,
    `Tiling.covering_tiles`).

compute (one unit, MPU or VPU by opcode; reads src1/src2, writes dst):
  CONV1D      dst[cols] = src1[rows] @ W[rows x cols] + bias[cols]; W streamed from HBM at
              src2 (tiles, §V-B zigzag) through the DMA weight buffer, bias from the DMA
              bias buffer at 0, where the dma before it put it (§V-D); GELU flag applies
              SFU_M's GELU to the output.
  MASKED_MM   dst[cols] = mask(src1[rows] @ K^T[rows x cols]) * scale (SCALE), K^T from
              HBM at src2; REDUCE_MAX also writes the row max to SRF[RMAX_REG] (SFU_M's
              reduce-max unit, §V-C).
  MM          dst[cols] = src1[rows] @ M[rows x cols] (Score x Value, LM head); with
              REDUCE_MAX and dst in the SRF, only the argmax index is written, to SRF[dst]
              (the LM head's token, §V-C).
  ADD/SUB/MUL dst[cols] = src1[cols] op src2[cols], or op the scalar SRF[src2] with SCALAR.
  EXP         dst[cols] = exp(src1[cols]).
  ACCUM       SRF[dst] = sum(src1[cols]) (SFU_V adder tree), divided by cols with MEAN.
  RECIP, RECIP_SQRT  SRF[dst] = 1 / SRF[src1] (+ SRF[src2] with SCALAR: LayerNorm's eps),
              or 1 / sqrt(...).
  LOAD/STORE  VFU bypass copy of cols elements src1 -> dst between a DMA/router buffer and
              the register files (§V-C: one cycle, no execution stage).
dma: LOAD off-chip src -> on-chip dst, STORE on-chip src -> off-chip dst, xfer_size
  elements; TRANSPOSE writes through the transpose unit (Value, §V-B).
router: SEND xfer_size elements from VRF src to the next core of the ring, written at dst
  there; RECV waits for xfer_size elements from the previous core into VRF dst (§V-E).
"""

from dataclasses import dataclass, field, fields
from enum import IntEnum, IntFlag
from typing import ClassVar

# A fixed instruction word: the widest format (compute, 170 bits below) rounded up to three
# 64-bit words. Not stated in seeds/001.
WORD_BITS = 192


class Kind(IntEnum):
    """The three instruction types of §IV-C (2 bits)."""

    COMPUTE = 0
    DMA = 1
    ROUTER = 2


class Op(IntEnum):
    """Compute opcodes: matrix (§IV-C 1-3) and vector instructions (§IV-C) (4 bits)."""

    CONV1D = 0
    MASKED_MM = 1
    MM = 2
    ADD = 3
    SUB = 4
    MUL = 5
    ACCUM = 6
    RECIP_SQRT = 7
    RECIP = 8
    EXP = 9
    LOAD = 10
    STORE = 11

    @property
    def is_matrix(self) -> bool:
        return self <= Op.MM


class DmaOp(IntEnum):
    LOAD = 0
    STORE = 1


class RouterOp(IntEnum):
    SEND = 0
    RECV = 1


class Loc(IntEnum):
    """Where an operand lives (3 bits). The paper names only the off-chip/on-chip bit; the
    register files and buffers of §V-B/D need telling apart, hence three bits."""

    VRF = 0  # vector register file (§V-D)
    SRF = 1  # scalar register file (§V-D)
    WBUF = 2  # DMA weight buffer (§V-B: weights "buffered in the DMA and streamed")
    BBUF = 3  # DMA bias/parameter buffer (§V-B: bias, WTE, WPE read from DDR)
    RBUF = 4  # router TX/RX buffer (§V-E)
    HBM = 5  # off-chip, 8 GiB (§IV-B)
    DDR = 6  # off-chip, 32 GiB (§IV-B)

    @property
    def off_chip(self) -> bool:
        return self >= Loc.HBM


class Flag(IntFlag):
    """Modifier bits (10 bits; not in seeds/001: they carry the SFU options §V-C names, the
    DMA transpose unit of §V-B and the controller's layer/token counters of §V-A)."""

    NONE = 0
    GELU = 1  # SFU_M GELU on the Conv1D output
    REDUCE_MAX = 2  # SFU_M reduce max (MaskedMM) / argmax (MM)
    SCALE = 4  # SFU_M multiplies by 1/sqrt(head_dim) (§V-C "we use a multiplier instead")
    SCALAR = 8  # src2 is a scalar register (vector-scalar op)
    MEAN = 16  # SFU_V divides the accumulation by the element count (§V-C)
    CONTEXT = 32  # a dimension given as 0 is the context length t + 1
    LAYER = 64  # HBM address += layer * layer_stride
    TOKEN = 128  # off-chip address += token offset
    TRANSPOSE = 256  # dma store through the transpose unit (Value, §V-B)
    INDEX = 512  # dma address indexed by SRF[RMAX_REG] (the embedding lookup)


# The scalar register SFU_M's reduce-max unit writes (§V-C): a MaskedMM's row max, an MM's
# argmax; a dma INDEX reads it. A fixed register, as the paper's instruction format has one
# destination only.
RMAX_REG = 0


# --- field widths (seeds/001 gives none; each is what the field must address) ---------------
KIND_BITS = 2  # three types
OP_BITS = 4  # twelve compute opcodes
FLAG_BITS = len(Flag.__members__) - 1  # one bit per modifier
LOC_BITS = 3  # seven locations
HBM_BYTES = 8 << 30  # U280 HBM2, 8 GiB (§IV-B)
DDR_BYTES = 32 << 30  # U280 DDR4, 32 GiB (§IV-B)
# Byte addresses of the largest memory, DDR: 35 bits. On-chip element addresses (register
# files of a few MiB, §V-D) fit the same field.
ADDR_BITS = (DDR_BYTES - 1).bit_length()
# Matrix dimensions an instruction names: up to the LM head's vocabulary (GPT-2's 50257
# needs 16 bits); 20 bits leave room for 1M-word vocabularies.
DIM_BITS = 20
# Elements one dma moves: a whole matrix shard at most (the 1.5B LM head, 50257 x 1600 =
# 80.4M elements, needs 27 bits); 32 bits.
XFER_BITS = 32
OFF_CHIP_BYTES = {Loc.HBM: HBM_BYTES, Loc.DDR: DDR_BYTES}


class EncodingError(ValueError):
    """A field does not fit its width, or a word is not a valid instruction."""


@dataclass(frozen=True)
class Compute:
    """(type, src1, src2, dst) plus the location of each operand (§IV-C) and the
    dimensions the operand collectors expand into microcode at run time (§V-D)."""

    op: Op
    src1: int
    src2: int
    dst: int
    rows: int = 0
    cols: int = 0
    src1_loc: Loc = Loc.VRF
    src2_loc: Loc = Loc.VRF
    dst_loc: Loc = Loc.VRF
    flags: Flag = Flag.NONE

    kind: ClassVar[Kind] = Kind.COMPUTE
    layout: ClassVar[tuple[tuple[str, int], ...]] = (
        ("op", OP_BITS), ("flags", FLAG_BITS),
        ("src1_loc", LOC_BITS), ("src1", ADDR_BITS),
        ("src2_loc", LOC_BITS), ("src2", ADDR_BITS),
        ("dst_loc", LOC_BITS), ("dst", ADDR_BITS),
        ("rows", DIM_BITS), ("cols", DIM_BITS))

    def __post_init__(self) -> None:
        _check(self)


@dataclass(frozen=True)
class Dma:
    """(type, src, dst, xfer_size) (§IV-C); one of src/dst is HBM or DDR."""

    op: DmaOp
    src: int
    dst: int
    xfer_size: int
    src_loc: Loc = Loc.HBM
    dst_loc: Loc = Loc.WBUF
    flags: Flag = Flag.NONE

    kind: ClassVar[Kind] = Kind.DMA
    layout: ClassVar[tuple[tuple[str, int], ...]] = (
        ("op", OP_BITS), ("flags", FLAG_BITS),
        ("src_loc", LOC_BITS), ("src", ADDR_BITS),
        ("dst_loc", LOC_BITS), ("dst", ADDR_BITS),
        ("xfer_size", XFER_BITS))

    def __post_init__(self) -> None:
        _check(self)
        off = (self.dst_loc if self.op == DmaOp.STORE else self.src_loc).off_chip
        on = not (self.src_loc if self.op == DmaOp.STORE else self.dst_loc).off_chip
        if not (off and on):
            raise EncodingError(f"dma {self.op.name.lower()} moves between off-chip "
                                f"(hbm, ddr) and on-chip memory, not {self.src_loc.name} -> "
                                f"{self.dst_loc.name}")


@dataclass(frozen=True)
class Router:
    """(type, src, dst, xfer_size) (§IV-C): a ring hop of register-file data (§V-E)."""

    op: RouterOp
    src: int
    dst: int
    xfer_size: int
    src_loc: Loc = Loc.VRF
    dst_loc: Loc = Loc.VRF
    flags: Flag = Flag.NONE

    kind: ClassVar[Kind] = Kind.ROUTER
    layout: ClassVar[tuple[tuple[str, int], ...]] = Dma.layout

    def __post_init__(self) -> None:
        _check(self)


Instr = Compute | Dma | Router
_TYPES: dict[Kind, type[Compute] | type[Dma] | type[Router]] = {
    Kind.COMPUTE: Compute, Kind.DMA: Dma, Kind.ROUTER: Router}
_OPS: dict[Kind, type[IntEnum]] = {Kind.COMPUTE: Op, Kind.DMA: DmaOp, Kind.ROUTER: RouterOp}


def _check(instr: Instr) -> None:
    """Every field fits its width; off-chip addresses fit their memory."""
    for name, bits in instr.layout:
        value = int(getattr(instr, name))
        if not 0 <= value < 1 << bits:
            raise EncodingError(f"{type(instr).__name__.lower()} field {name}={value} does "
                                f"not fit {bits} bits (0..{(1 << bits) - 1})")
    for name, _ in instr.layout:
        if name.endswith("_loc"):
            loc = getattr(instr, name)
            limit = OFF_CHIP_BYTES.get(loc)
            address = getattr(instr, name[:-4])
            if limit is not None and address >= limit:
                raise EncodingError(f"{name[:-4]}={address:#x} is beyond {loc.name}'s "
                                    f"{limit >> 30} GiB")


def encode(instr: Instr) -> int:
    """The instruction as one WORD_BITS-bit word: type in the top bits, then the fields in
    `layout` order, most significant first."""
    word = int(instr.kind)
    used = KIND_BITS
    for name, bits in instr.layout:
        word = (word << bits) | int(getattr(instr, name))
        used += bits
    return word << (WORD_BITS - used)


def decode(word: int) -> Instr:
    """Inverse of `encode`; refuses words that are not instructions."""
    if not 0 <= word < 1 << WORD_BITS:
        raise EncodingError(f"word {word:#x} is not {WORD_BITS} bits")
    try:
        kind = Kind(word >> (WORD_BITS - KIND_BITS))
    except ValueError as exc:
        raise EncodingError(f"word {word:#x}: type field is not compute, dma or router") from exc
    cls = _TYPES[kind]
    shift = WORD_BITS - KIND_BITS
    values: dict[str, object] = {}
    for name, bits in cls.layout:
        shift -= bits
        values[name] = (word >> shift) & ((1 << bits) - 1)
    if word & ((1 << shift) - 1):
        raise EncodingError(f"word {word:#x}: padding bits are not zero")
    try:
        for f in fields(cls):
            raw = values[f.name]
            if f.name == "op":
                values[f.name] = _OPS[kind](raw)
            elif f.name.endswith("_loc"):
                values[f.name] = Loc(raw)
            elif f.name == "flags":
                values[f.name] = Flag(raw)
    except ValueError as exc:
        raise EncodingError(f"word {word:#x}: {exc}") from exc
    return cls(**values)  # type: ignore[arg-type]


def to_bytes(instrs: list[Instr] | tuple[Instr, ...]) -> bytes:
    """Big-endian words, WORD_BITS // 8 bytes each (the .bin a core's buffer loads)."""
    return b"".join(encode(i).to_bytes(WORD_BITS // 8, "big") for i in instrs)


def from_bytes(data: bytes) -> list[Instr]:
    size = WORD_BITS // 8
    if len(data) % size:
        raise EncodingError(f"{len(data)} bytes is not a whole number of {size}-byte words")
    return [decode(int.from_bytes(data[i:i + size], "big")) for i in range(0, len(data), size)]


@dataclass(frozen=True)
class SystemConfig:
    """What the host sends the controller with the start signal (§V-A): core ID and count,
    decoder layers, input and output tokens; plus the tile shape and the HBM and DDR
    distances between two layers' regions (the LAYER modifier), fixed by the compiler."""

    core_id: int
    cores: int
    layers: int
    input_tokens: int
    output_tokens: int
    d: int
    l: int  # noqa: E741
    layer_stride: int
    ddr_layer_stride: int = 0
    max_context: int = 0  # tokens a KV cache matrix holds (the model's positions)


@dataclass(frozen=True)
class Section:
    """Instructions run as one unit of the controller loop, each with a listing note."""

    name: str
    instrs: tuple[Instr, ...]
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.notes and len(self.notes) != len(self.instrs):
            raise ValueError(f"section {self.name}: {len(self.notes)} notes for "
                             f"{len(self.instrs)} instructions")


@dataclass(frozen=True)
class Program:
    """One core's program: `prologue` (embedding) per token, `layer` per decoder layer per
    token, `epilogue` (LM head) per generated token; see the module docstring."""

    config: SystemConfig
    prologue: Section
    layer: Section
    epilogue: Section

    @property
    def sections(self) -> tuple[Section, Section, Section]:
        return (self.prologue, self.layer, self.epilogue)

    def tokens(self) -> range:
        """Token positions the controller runs: every prompt token, then each generated
        token but the last (its successor is not asked for)."""
        c = self.config
        return range(c.input_tokens + c.output_tokens - 1)

    def runs_epilogue(self, token: int) -> bool:
        return token >= self.config.input_tokens - 1
