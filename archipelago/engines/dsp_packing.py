"""Integer products one DSP computes per cycle, per DSP kind and operand widths.

DSP48E2 (UltraScale and UltraScale+, UG579): P = (A + D) x B + C with a 27-bit pre-adder,
an 18-bit B port and a 45-bit product. LORA's rule (seeds/002 §V-A, after Xilinx WP486 and
WP521): activations share the pre-adder port, each in a field as wide as its product
(activation bits + weight bits) so that the products land side by side in P; the shared
weight sits in B. The fields that fit the port, with the last product inside P, are the
products per DSP: two for INT8 x INT8 (fields 16 bits apart, "the high and low 16 bits of
the product P"), two for INT4 weights x INT8 activations (12-bit fields: a third would need
8 + 2 x 12 = 32 bits of a 27-bit port). tests/test_dsp_packing.py carries out the INT8
packing bit by bit for every int8 triple.

DSP48E1 (7 series, UG479): the same rule on its 25-bit pre-adder and 43-bit product.
DSP58 (Versal, AM004 "Dot Product Unit"; DS950): the INT8 mode splits the 27 x 24
multiplier into three 9 x 8 multipliers whose products are summed, three INT8 products a
cycle (INT4 weights sign-extend into the same 8-bit lanes); the pre-adder rule on its
27-bit port gives two, so the dot-product mode is the better.
Intel variable-precision DSP blocks (Stratix 10 and Arria 10, UG-S10-DSP and the Arria 10
Native Fixed Point DSP IP guide): two independent 18 x 19 multipliers per block, two
products of up to 18 bits a cycle.
"""

from archipelago.hardware.device import DSPKind

# Pre-adder port and product widths of the Xilinx DSPs LORA's rule packs (UG479, UG579,
# AM004).
_PORT_BITS = {"dsp48e1": 25, "dsp48e2": 27, "dsp58": 27}
_PRODUCT_BITS = {"dsp48e1": 43, "dsp48e2": 45, "dsp58": 58}
# Products a native mode computes each cycle for operands of at most 8 bits: DSP58's INT8
# dot product (AM004), the Intel block's two 18 x 19 multipliers (UG-S10-DSP).
_NATIVE_8BIT = {"dsp58": 3, "intel-vp": 2}


def lora_fields(port_bits: int, product_bits: int, weight_bits: int,
                activation_bits: int) -> int:
    """LORA's §V-A rule: activations in fields of (activation + weight) bits along the
    `port_bits`-wide pre-adder port, the last activation's own bits inside the port and its
    product's field inside the `product_bits`-wide P."""
    field = weight_bits + activation_bits
    by_port = (port_bits - activation_bits) // field + 1
    by_product = product_bits // field
    return max(1, min(by_port, by_product))


def products_per_dsp(kind: DSPKind, weight_bits: int, activation_bits: int) -> int:
    """Integer products of `weight_bits` x `activation_bits` one DSP of `kind` computes
    each cycle: the better of LORA's packing rule and the kind's native modes."""
    packed = (lora_fields(_PORT_BITS[kind], _PRODUCT_BITS[kind], weight_bits, activation_bits)
              if kind in _PORT_BITS else 1)
    native = _NATIVE_8BIT.get(kind, 1) if max(weight_bits, activation_bits) <= 8 else 1
    return max(packed, native)


# What the packing buys on the DSP48E2 that LORA-Q (seeds/002 §V-A) and Galapagos
# (seeds/000, ZU19EG) run on: two int8 products per multiply when they share an operand.
PRODUCTS_PER_DSP = products_per_dsp("dsp48e2", 8, 8)
