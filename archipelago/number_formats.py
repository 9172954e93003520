"""The one vocabulary of number formats (`--precision`) every kind shares: GPU rows,
DFX and LORA rings. Each format says how wide a weight, an activation and a cached key or
value are, and what a stored weight costs in bytes (group scales included); each kind says
which formats its devices run and refuses the rest in one line.

    fp16, bf16  16-bit weights, activations and KV cache
    fp8         FP8 (E4M3) weights and activations, FP8 KV cache (GPU tensor cores)
    w8a8        INT8 weights and activations (SmoothQuant, Xiao et al. 2023, per-tensor or
                per-channel scales), INT8 KV cache
    w4a16       INT4 weights in groups of GROUP_SIZE with one FP16 scale each (AWQ, GPTQ),
                FP16 activations and KV cache
    w4a8        INT4 weights in groups of GROUP_SIZE (one FP16 scale each), INT8
                activations and KV cache (QServe-style W4A8)

An 8-bit activation format quantizes the attention's inputs too (SmoothQuant-O3, which
LORA-Q runs, seeds/002 §IV-B-c; TensorRT-LLM's W8A8 with its INT8 KV cache), so its KV
cache is 8-bit. `-kv8` asks for an INT8 KV cache beside 16-bit activations: `fp16-kv8`,
`bf16-kv8`, `w4a16-kv8` (one static scale per tensor, as TensorRT-LLM's INT8 KV cache).
The GPU rows' former spellings stay as synonyms: `int8` is `w8a8`, `int4` is `w4a16`.
"""

from dataclasses import dataclass
from functools import lru_cache

from archipelago.errors import ArchipelagoError

# Weights per FP16 scale in the group-quantized formats (AWQ's and GPTQ's default group
# size, 128; the emulation's quantizer, tensor_parallel/emulate/, uses the same constant).
GROUP_SIZE = 128
# The FP16 scale each group of weights carries.
SCALE_BYTES = 2
# The suffix asking for an INT8 KV cache beside 16-bit activations.
KV8 = "-kv8"
# Spellings kept from the GPU rows' first vocabulary (issue 33).
SYNONYMS = {"int8": "w8a8", "int4": "w4a16"}


@dataclass(frozen=True)
class NumberFormat:
    """Element types of weights, activations and the KV cache (`fp16`, `bf16`, `fp8`,
    `int8`, `int4`), and `group`: weights per FP16 scale (0: no group scales)."""

    name: str
    weight: str
    activation: str
    kv: str
    group: int = 0

    @property
    def weight_bits(self) -> int:
        return _BITS[self.weight]

    @property
    def activation_bits(self) -> int:
        return _BITS[self.activation]

    @property
    def weight_bytes(self) -> float:
        """Bytes a stored weight takes in memory, its share of its group's scale included."""
        scale = SCALE_BYTES / self.group if self.group else 0.0
        return self.weight_bits / 8 + scale

    @property
    def activation_bytes(self) -> float:
        return self.activation_bits / 8

    @property
    def kv_bytes(self) -> float:
        """Bytes of one cached key or value (a per-tensor scale is negligible)."""
        return _BITS[self.kv] / 8

    @property
    def integer(self) -> bool:
        """Products in integer arithmetic (8-bit activations)."""
        return self.activation == "int8"


_BITS = {"fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}


def _with_kv8(fmt: NumberFormat) -> list[NumberFormat]:
    """`fmt`, and its INT8-KV twin where its KV cache is 16-bit."""
    if _BITS[fmt.kv] == 8:
        return [fmt]
    return [fmt, NumberFormat(fmt.name + KV8, fmt.weight, fmt.activation, "int8", fmt.group)]


FORMATS = {f.name: f for base in (
    NumberFormat("fp16", "fp16", "fp16", "fp16"),
    NumberFormat("bf16", "bf16", "bf16", "bf16"),
    NumberFormat("fp8", "fp8", "fp8", "fp8"),
    NumberFormat("w8a8", "int8", "int8", "int8"),
    NumberFormat("w4a16", "int4", "fp16", "fp16", GROUP_SIZE),
    NumberFormat("w4a8", "int4", "int8", "int8", GROUP_SIZE),
) for f in _with_kv8(base)}
# Every name `--precision` takes: the formats, then the synonyms.
PRECISIONS = (*FORMATS, *SYNONYMS)


def canonical(text: str) -> str:
    """The format name `text` spells (synonyms resolved), or a one-line refusal naming the
    valid choices."""
    name = text.strip().lower()
    name = SYNONYMS.get(name, name)
    if name not in FORMATS:
        raise ArchipelagoError(f"--precision '{text[:20]}': valid choices are "
                               f"{', '.join(PRECISIONS)}")
    return name


@lru_cache(maxsize=64)
def number_format(text: str) -> NumberFormat:
    """The format `text` names (see `canonical`); asked for by every engine config's
    `format`, so the few names asked for are looked up once."""
    return FORMATS[canonical(text)]


def refuse_unless(name: str, runs: tuple[str, ...], who: str, why: str) -> NumberFormat:
    """The format `name` if `who` runs it (`runs`), else a one-line refusal saying why and
    naming the formats it runs."""
    fmt = number_format(name)
    if fmt.name not in runs:
        raise ArchipelagoError(f"--precision {fmt.name}: {who} {why}; it runs "
                               f"{', '.join(runs)}")
    return fmt
