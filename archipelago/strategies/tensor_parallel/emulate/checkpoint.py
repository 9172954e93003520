"""Read one rank's weight slices straight from a safetensors checkpoint: a rank never holds
more of a tensor than its DevicePlan names."""

import os
import stat
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
        data = self._where[key].get_slice(key)[tuple(index)]
        return data.T.contiguous() if source.transposed else data


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
