"""The number formats a GPU serves a decoder in (`--precision`, the shared vocabulary of
archipelago/number_formats.py): the bytes each weight and each cached key/value takes, the
tensor-core format its products run in (the activations'), and the CUDA-core work a
4-bit-weight format adds to unpack its weights.

    fp16, bf16  16-bit weights, activations and KV cache on the 16-bit tensor cores
    fp8         FP8 (E4M3) weights and activations on the FP8 tensor cores, FP8 KV cache
                (TensorRT-LLM's and vLLM's `kv_cache_dtype=fp8`)
    w8a8        (also `int8`) SmoothQuant W8A8 on the INT8 tensor cores, INT8 KV cache
                (TensorRT-LLM's INT8 KV cache)
    w4a16       (also `int4`) weight-only INT4 (AWQ/GPTQ, group size 128 with an FP16 scale
                each): 4-bit weights read, unpacked to FP16 on the CUDA cores, FP16 products
    w4a8        INT4 weights unpacked to INT8 on the CUDA cores, INT8 products and KV cache
    *-kv8       an INT8 KV cache beside 16-bit activations (its scale folded into the
                attention kernel, as TensorRT-LLM's INT8 KV cache)
"""

from dataclasses import dataclass

from archipelago.errors import ArchipelagoError
from archipelago.hardware.device import Device
from archipelago.number_formats import FORMATS as NUMBER_FORMATS
from archipelago.number_formats import canonical

# A weight-only INT4 weight's CUDA-core work before its FP16 product: unpack (shift, mask),
# convert to FP16, subtract the zero point, multiply by the group's scale, about 4
# operations (AWQ's and GPTQ's dequantizing GEMV kernels; Marlin's lop3 tricks reach 2, so
# the plausible range is 2-6). W4A8 unpacks to INT8 with the same steps (QServe).
INT4_DEQUANT_OPS = 4.0


@dataclass(frozen=True)
class Format:
    """One `--precision`: bytes per weight and per cached value, the tensor-core format of
    its products, and CUDA-core operations per weight to dequantize it."""

    name: str
    weight_bytes: float
    kv_bytes: float
    tensor: str
    dequant_ops: float = 0.0


FORMATS = {name: Format(name, f.weight_bytes, f.kv_bytes, f.activation,
                        INT4_DEQUANT_OPS if f.weight == "int4" else 0.0)
           for name, f in NUMBER_FORMATS.items()}


def tensor_rates(device: Device) -> dict[str, float]:
    """The dense tensor-core rate of every format `device` has (FP16 always, the rest from
    its catalog `gpu:` entry)."""
    fp16 = {"fp16": device.peak_fp16_flops} if device.peak_fp16_flops else {}
    return {**fp16, **(device.gpu.tensor_ops_per_s if device.gpu else {})}


def served(device: Device) -> list[str]:
    """The precisions `device` serves: the formats whose tensor cores it has."""
    rates = tensor_rates(device)
    return [name for name, f in FORMATS.items() if f.tensor in rates]


def format_on(device: Device, precision: str) -> tuple[Format, float]:
    """`precision`'s format and its tensor rate on `device`, or a one-line refusal."""
    fmt, rates = FORMATS[canonical(precision)], tensor_rates(device)
    if fmt.tensor not in rates:
        raise ArchipelagoError(f"--precision {fmt.name}: {device.name} has no "
                               f"{fmt.tensor.upper()} tensor cores; it serves "
                               f"{', '.join(served(device))}")
    return fmt, rates[fmt.tensor]
