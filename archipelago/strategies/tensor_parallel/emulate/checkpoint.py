"""Read one rank's weight slices straight from a safetensors checkpoint: a rank never holds
more of a tensor than its DevicePlan names."""

import json
import mmap
import os
import stat
import sys
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from safetensors import safe_open

from archipelago.emulate.errors import EmulationError
from archipelago.models.hf_state_dict import HFSource, hf_source
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, all_weights
from archipelago.strategies.tensor_parallel.plan import DevicePlan, Shard


class CheckpointReader:
    """All *.safetensors files of a Hugging Face checkpoint directory, opened lazily."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._files = sorted(directory.glob("*.safetensors"))
        if not self._files:
            raise EmulationError(f"{directory}: no *.safetensors files (save the checkpoint "
                                 "with safe serialization, the transformers default)")
        self._stack = ExitStack()
        self._where: dict[str, Any] = {}
        self._file_of: dict[str, Path] = {}
        self._mapped: dict[Path, _MappedFile | None] = {}

    def __enter__(self) -> "CheckpointReader":
        for file in self._files:
            try:
                if not stat.S_ISREG(os.stat(file).st_mode):  # a FIFO would block the open
                    raise EmulationError(f"--checkpoint {file}: not a regular file")
                handle = self._stack.enter_context(safe_open(str(file), framework="pt"))
            except EmulationError:
                self._stack.close()
                raise
            except Exception as err:  # SafetensorError, OSError: named, on one line
                self._stack.close()
                raise EmulationError(f"--checkpoint {file}: not a readable safetensors file "
                                     f"({type(err).__name__}: {err})") from None
            self._where.update(dict.fromkeys(handle.keys(), handle))
            self._file_of.update(dict.fromkeys(handle.keys(), file))
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stack.close()

    def _key(self, key: str) -> str:
        """`key`, or `key` without its first component: checkpoints of the bare base model
        (e.g. GPT-2's hub files) omit 'transformer.' / 'model.'."""
        for candidate in (key, key.partition(".")[2]):
            if candidate in self._where:
                return candidate
        raise EmulationError(f"{self.directory}: tensor '{key}' not found in the checkpoint")

    def _checked_key(self, source: HFSource, tensor: WeightTensor) -> str:
        """The checkpoint's key for `tensor`, its stored shape checked against the shape
        the model config implies (reading only the header)."""
        if source.experts:  # one matrix per expert: check each, name the first
            inner = _per_expert(tensor)
            keys = [self._checked_key(_expert(source, e), inner) for e in range(source.experts)]
            return keys[0]
        stored = [*tensor.shape[:-1], tensor.shape[-1] * source.parts]
        if source.transposed:
            stored.reverse()
        key = self._key(source.key)
        shape = list(self._where[key].get_slice(key).get_shape())
        if shape != stored:
            raise EmulationError(f"{self.directory}: tensor '{key}' has shape {shape}, the "
                                 f"model config implies {stored}")
        return key

    def check(self, spec: ModelSpec) -> None:
        """Every tensor of `spec` is in the checkpoint with the shape its config implies:
        found by the launcher, before a rank starts."""
        for tensor in all_weights(spec):
            self._checked_key(hf_source(spec, tensor), tensor)

    def read(self, source: HFSource, tensor: WeightTensor, shard: Shard) -> torch.Tensor:
        """`shard` of `tensor` in canonical (in, out) layout, reading nothing else; an
        expert stack reads the experts the shard names (axis 0) or each one's slice."""
        if source.experts:
            first, stop = (shard.start, shard.stop) if shard.axis == 0 else (0, source.experts)
            inner = Shard(None) if shard.axis in (None, 0) else replace(shard,
                                                                       axis=shard.axis - 1)
            return torch.stack([self.read(_expert(source, e), _per_expert(tensor), inner)
                                for e in range(first, stop)])
        key = self._checked_key(source, tensor)
        index = [slice(0, n) for n in tensor.shape]
        if shard.axis is not None:
            index[shard.axis] = slice(shard.start, shard.stop)
        width = tensor.shape[-1]
        last = index[-1]
        index[-1] = slice(last.start + source.part * width, last.stop + source.part * width)
        if source.transposed:
            index.reverse()
        view = self._slice(key)
        if not source.transposed and all(
                (s.start, s.stop) == (0, n) for s, n in zip(index, view.get_shape(), strict=True)):
            whole = self._whole(key)
            if whole is not None:
                return whole
        data = view[tuple(index)]
        return data.T.contiguous() if source.transposed else data

    def _slice(self, key: str) -> Any:
        return self._where[key].get_slice(key)

    def _whole(self, key: str) -> torch.Tensor | None:
        """Tensor `key` whole, as the file's own pages (mapped copy-on-write: never written,
        they stay the page cache's, shared by every rank that reads them), or None where
        its dtype has no torch twin here. A rank then neither copies nor zero-fills them:
        the token table every DFX rank holds whole is 206 MB of gpt2-345m's 489 MiB per rank
        on 4 ranks, 0.1 s of their loading on 2 cores (issue 36)."""
        file = self._file_of[key]
        if file not in self._mapped:
            self._mapped[file] = _MappedFile.open(file)
        mapped = self._mapped[file]
        return None if mapped is None else mapped.tensor(key)


# safetensors' dtype names (its format's header) and torch's
_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
           "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
           "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


@dataclass
class _MappedFile:
    """A safetensors file mapped whole: its header (u64 little-endian length, then JSON
    naming each tensor's dtype, shape and byte range after the header) and its bytes."""

    data: mmap.mmap
    start: int  # where the tensors' bytes begin
    header: dict[str, Any]

    @classmethod
    def open(cls, file: Path) -> "_MappedFile | None":
        """None on a big-endian machine: the format's bytes are little-endian."""
        if sys.byteorder != "little":
            return None
        with open(file, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
        return cls(data, 8 + size, header)

    def tensor(self, key: str) -> torch.Tensor | None:
        entry = self.header[key]
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            return None
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(self.data, dtype=dtype, count=(end - begin) // dtype.itemsize,
                                offset=self.start + begin) if end > begin else (
            torch.empty(0, dtype=dtype))
        return flat.view(entry["shape"])


def _expert(source: HFSource, expert: int) -> HFSource:
    return replace(source, key=source.key.format(expert), experts=0)


def _per_expert(tensor: WeightTensor) -> WeightTensor:
    """One expert's matrix of an (experts, in, out) stack."""
    return replace(tensor, shape=tensor.shape[1:])


@dataclass
class LoadedShard:
    """A rank's weights by canonical name, and the bytes it holds in each memory kind."""

    weights: dict[str, torch.Tensor] = field(default_factory=dict)
    bytes_by_memory: dict[str, int] = field(default_factory=dict)


def load_shard(spec: ModelSpec, device: DevicePlan, reader: CheckpointReader,
               convert: Callable[[WeightTensor, torch.Tensor], torch.Tensor],
               tensors: Iterable[WeightTensor] | None = None) -> LoadedShard:
    """Every tensor of the model (or only `tensors`: a pipeline stage's layers and ends),
    cut to the Shard this device's plan names for it, then converted (to the run's dtype,
    or quantized) before its bytes are counted."""
    loaded = LoadedShard()
    for tensor in all_weights(spec) if tensors is None else tensors:
        shard = device.shard_for(tensor)
        data = convert(tensor, reader.read(hf_source(spec, tensor), tensor, shard))
        loaded.weights[tensor.name] = data
        size = data.numel() * data.element_size()
        loaded.bytes_by_memory[shard.memory] = loaded.bytes_by_memory.get(shard.memory, 0) + size
    return loaded
