"""Two int8 products from one DSP48E2 multiply (seeds/002 §V-A; the packing of Xilinx
WP486 that LORA follows).

The 27-bit pre-adder holds two int8 activations, one shifted 18 bits up; the 18-bit port
holds the shared int8 weight. The 45-bit product then carries a*w in its low 18 bits (as
a signed field) and b*w above them, with a borrow from the low field when it is negative.
tests/test_dsp_packing.py carries out this packing bit by bit for every int8 triple.
"""

# What the packing buys: products one DSP48E2 computes per multiply when they share an
# operand. The resource models of the LORA-Q array and the Galapagos Linears use it.
PRODUCTS_PER_DSP = 2
