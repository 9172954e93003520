"""A rank's whole tensors read as the checkpoint file's own pages: the same values, dtype and
shape as safetensors' own reader gives, and the same shards as reading every tensor through
it (the mapped path is taken only where a tensor is read whole and untransposed)."""

import ctypes
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from archipelago.api import make_plan
from archipelago.models.hf_state_dict import hf_source
from archipelago.models.weights import all_weights
from archipelago.strategies.tensor_parallel.emulate.checkpoint import (
    CheckpointReader,
    load_shard,
)
from archipelago.strategies.tensor_parallel.emulate.reference import save_model
from tests.test_emulate import GPT2, SEED, hf_model, write_config


def test_mapped_tensors_are_what_safetensors_reads(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(3, 5, generator=generator),
        "f16": torch.randn(7, generator=generator).half(),
        "bf16": torch.randn(2, 2, 3, generator=generator).bfloat16(),
        "i8": torch.randint(-128, 128, (9,), generator=generator, dtype=torch.int8),
        "i64": torch.tensor([2**40, -3]),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 4),
    }
    save_file(tensors, tmp_path / "model.safetensors")
    expected = load_file(tmp_path / "model.safetensors")
    with CheckpointReader(tmp_path) as reader:
        for key, want in expected.items():
            got = reader._whole(key)
            assert got is not None and got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got, want), key


@pytest.mark.parametrize("ranks", [2, 4])
def test_shards_match_those_read_through_safetensors(tmp_path: Path, ranks: int,
                                                     monkeypatch) -> None:
    """Every rank's shard of the tiny GPT-2 (its token table whole on every DFX rank,
    matrices split) is bit-identical with and without the mapped path, which the table
    takes."""
    plan = make_plan(write_config(tmp_path / "config", GPT2), f"{ranks}xu280", "dfx").program
    directory = save_model(hf_model(GPT2, SEED), tmp_path / "weights")
    spec = plan.spec

    def shards() -> list[dict[str, torch.Tensor]]:
        with CheckpointReader(directory) as reader:
            return [load_shard(spec, device, reader, lambda t, data: data).weights
                    for device in plan.devices]

    mapped = shards()
    with CheckpointReader(directory) as reader:
        table = next(t for t in all_weights(spec) if t.name == "embed_tokens.weight")
        whole = reader.read(hf_source(spec, table), table, plan.devices[0].shard_for(table))
        (mapped_file,) = reader._mapped.values()  # the token table's pages are the file's
        start = ctypes.addressof(ctypes.c_char.from_buffer(mapped_file.data))
        assert start <= whole.data_ptr() < start + len(mapped_file.data)
    monkeypatch.setattr(CheckpointReader, "_whole", lambda self, key: None)
    copied = shards()
    for ours, theirs in zip(mapped, copied, strict=True):
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert ours[name].dtype == theirs[name].dtype, name
            assert torch.equal(ours[name], theirs[name]), name
