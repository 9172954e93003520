"""The DFX instruction set (seeds/001 §IV-C): encoding and assembly round trips, and the
field widths refusing what does not fit."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archipelago.strategies.tensor_parallel.dfx_program.asm import (
    format_instr,
    parse,
    parse_listing,
)
from archipelago.strategies.tensor_parallel.dfx_program.isa import (
    ADDR_BITS,
    DDR_BYTES,
    DIM_BITS,
    HBM_BYTES,
    WORD_BITS,
    XFER_BITS,
    Compute,
    Dma,
    DmaOp,
    EncodingError,
    Flag,
    Loc,
    Op,
    Router,
    RouterOp,
    decode,
    encode,
    from_bytes,
    to_bytes,
)

ON_CHIP = [loc for loc in Loc if not loc.off_chip]
LIMIT = {Loc.HBM: HBM_BYTES, Loc.DDR: DDR_BYTES}


def _edge(bits: int) -> st.SearchStrategy[int]:
    """Any value of the width, its extremes drawn often."""
    top = (1 << bits) - 1
    return st.one_of(st.sampled_from([0, 1, top]), st.integers(0, top))


@st.composite
def _operand(draw: st.DrawFn, locs: list[Loc]) -> tuple[Loc, int]:
    loc = draw(st.sampled_from(locs))
    top = LIMIT.get(loc, 1 << ADDR_BITS) - 1
    return loc, draw(st.one_of(st.sampled_from([0, top]), st.integers(0, top)))


FLAGS = st.builds(Flag, st.integers(0, (1 << len(Flag.__members__) - 1) - 1))


@st.composite
def _compute(draw: st.DrawFn) -> Compute:
    (l1, a1), (l2, a2), (ld, ad) = (draw(_operand(list(Loc))) for _ in range(3))
    return Compute(draw(st.sampled_from(list(Op))), a1, a2, ad, draw(_edge(DIM_BITS)),
                   draw(_edge(DIM_BITS)), l1, l2, ld, draw(FLAGS))


@st.composite
def _dma(draw: st.DrawFn) -> Dma:
    op = draw(st.sampled_from(list(DmaOp)))
    off = draw(_operand([Loc.HBM, Loc.DDR]))
    on = draw(_operand(ON_CHIP))
    (sl, sa), (dl, da) = (off, on) if op == DmaOp.LOAD else (on, off)
    return Dma(op, sa, da, draw(_edge(XFER_BITS)), sl, dl, draw(FLAGS))


@st.composite
def _router(draw: st.DrawFn) -> Router:
    (sl, sa), (dl, da) = draw(_operand(ON_CHIP)), draw(_operand(ON_CHIP))
    return Router(draw(st.sampled_from(list(RouterOp))), sa, da, draw(_edge(XFER_BITS)),
                  sl, dl, draw(FLAGS))


INSTRS = st.one_of(_compute(), _dma(), _router())


@given(INSTRS)
def test_encode_decode_round_trip(instr: Compute | Dma | Router) -> None:
    word = encode(instr)
    assert 0 <= word < 1 << WORD_BITS
    assert decode(word) == instr


@given(INSTRS)
def test_assembly_round_trip(instr: Compute | Dma | Router) -> None:
    assert parse(format_instr(instr)) == instr


@given(st.lists(INSTRS, max_size=8))
def test_binary_image_round_trip(instrs: list[Compute | Dma | Router]) -> None:
    data = to_bytes(instrs)
    assert len(data) == len(instrs) * WORD_BITS // 8
    assert from_bytes(data) == instrs


def test_every_opcode_has_its_own_word() -> None:
    """Same operands, different opcodes and types: all words differ (no field aliasing)."""
    words = {encode(Compute(op, 1, 2, 3, 4, 5)) for op in Op}
    words |= {encode(Dma(op, 1, 2, 3, *((Loc.HBM, Loc.VRF) if op == DmaOp.LOAD else
                                        (Loc.VRF, Loc.HBM)))) for op in DmaOp}
    words |= {encode(Router(op, 1, 2, 3)) for op in RouterOp}
    assert len(words) == len(Op) + len(DmaOp) + len(RouterOp)


def test_a_field_one_past_its_width_is_refused() -> None:
    with pytest.raises(EncodingError, match=r"cols=1048576 does not fit 20 bits"):
        Compute(Op.ADD, 0, 0, 0, cols=1 << DIM_BITS)
    with pytest.raises(EncodingError, match="xfer_size"):
        Dma(DmaOp.LOAD, 0, 0, 1 << XFER_BITS)
    with pytest.raises(EncodingError, match="does not fit 35 bits"):
        Router(RouterOp.SEND, 1 << ADDR_BITS, 0, 1)
    with pytest.raises(EncodingError, match="beyond HBM's 8 GiB"):
        Dma(DmaOp.LOAD, HBM_BYTES, 0, 1)


def test_widths_come_from_the_memories_they_address() -> None:
    assert 1 << ADDR_BITS == DDR_BYTES  # 32 GiB, the largest memory (§IV-B)
    assert (1 << DIM_BITS) > 50257  # GPT-2's vocabulary, the widest matrix
    assert sum(b for _, b in Compute.layout) + 2 <= WORD_BITS


def test_dma_moves_between_off_chip_and_on_chip() -> None:
    with pytest.raises(EncodingError, match="between off-chip"):
        Dma(DmaOp.LOAD, 0, 0, 1, Loc.VRF, Loc.WBUF)
    with pytest.raises(EncodingError, match="between off-chip"):
        Dma(DmaOp.STORE, 0, 0, 1, Loc.HBM, Loc.DDR)


def test_bad_words_and_text_are_refused() -> None:
    with pytest.raises(EncodingError, match="type field"):
        decode(3 << (WORD_BITS - 2))
    with pytest.raises(EncodingError, match="padding"):
        decode(encode(Router(RouterOp.SEND, 0, 0, 1)) | 1)
    with pytest.raises(EncodingError, match="unknown compute op 'fma'"):
        parse("fma vrf:0x0, vrf:0x0 -> vrf:0x0 rows=0 cols=1")
    with pytest.raises(EncodingError, match="unknown flag 'fast'"):
        parse("add vrf:0x0, vrf:0x0 -> vrf:0x0 rows=0 cols=1 [fast]")
    with pytest.raises(EncodingError, match="not a DFX instruction"):
        parse("nop")
    with pytest.raises(EncodingError, match="before any section"):
        parse_listing("add vrf:0x0, vrf:0x0 -> vrf:0x0 rows=0 cols=1\n")


def test_a_hand_written_word() -> None:
    """`router.send vrf:0x1 -> vrf:0x2 n=3`, field by field from the top: type 2 (2 bits),
    op 0 (4), flags 0 (10), src loc 0 (3), src 1 (35), dst loc 0 (3), dst 2 (35),
    xfer 3 (32), then zero padding to 192 bits."""
    used = 2 + 4 + 10 + 3 + 35 + 3 + 35 + 32
    fields = (((((2 << 14) << 38 | 1) << 38) | 2) << 32) | 3
    assert encode(parse("router.send vrf:0x1 -> vrf:0x2 n=3")) == fields << (WORD_BITS - used)


@given(st.integers(0, (1 << WORD_BITS) - 1))
def test_any_word_decodes_to_itself_or_is_refused(word: int) -> None:
    try:
        instr = decode(word)
    except EncodingError:
        return
    assert encode(instr) == word
