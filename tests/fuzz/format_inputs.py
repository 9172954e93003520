"""Fuzz inputs for `--precision` (number_formats.py): every name, near misses and junk, on
the FPGA rings and a GPU row."""

import hypothesis.strategies as st

from archipelago.number_formats import PRECISIONS
from tests.fuzz.inputs import NUMBERISH

# `--precision` on the FPGA rings and a GPU row: every name, near misses, and junk.
PRECISION_TEXT = st.one_of(
    st.sampled_from([*PRECISIONS, "W4A16", " w8a8 ", "w4a16-kv8-kv8", "fp16-KV8", "w8a8-kv8",
                     "fp8-kv8", "fp32", "int2", "w4a16,fp16", ""]),
    NUMBERISH)


@st.composite
def precision_args(draw: st.DrawFn) -> list[str]:
    """`archi plan` of a ring or GPU row in a drawn format on a drawn board."""
    strategy = draw(st.sampled_from(["dfx", "lora-f", "lora-q", "gpu-graph"]))
    board = draw(st.sampled_from(["u280", "u55c", "v80", "vhk158", "h100", "v100"]))
    cluster = f"{draw(st.sampled_from([1, 2]))}x{board}"
    return ["plan", "gpt2-345m", "--cluster", cluster, "--strategy", strategy, "--tokens",
            "8:8", "--precision", draw(PRECISION_TEXT), "--json"]
