"""A torch.export archive (.pt2) read entry by entry, never unpickled: `torch.export.load`
falls back to torch's unsafe unpickler for sample inputs and weights it cannot read
otherwise, and loads compiled AOTInductor libraries, so a file someone sends would run
their code. Here the weights and constants are raw bytes turned into tensors as their JSON
configs describe, the example inputs go through torch's weights-only unpickler (tensors,
tuples, dicts and numbers only), the program is checked by pt2_graph before torch's
deserializer sees it, and anything else an archive may hold (pickled tensors, custom
objects, compiled code) is refused in one line naming its entry.
"""

import io
import json
import math
import re
import zipfile
from pathlib import Path
from typing import Any

from archipelago.errors import ConfigError, elide, first_line
from archipelago.models.pt2_graph import check_names, check_program, plain_outputs

MODEL = "model"  # the program torch.export.save writes and torch.export.load returns
BYTEORDER = "byteorder"  # torch's archive writer records the raw tensors' byte order
# One sample's inputs (batch size 1): a 4K RGB frame is 2.5e7 values; more is a hostile file
# asking the shape propagation to compute with it.
MAX_INPUT_ELEMENTS = 2**27


class Archive:
    """The entries of one .pt2, by their path under the archive's root folder."""

    def __init__(self, path: Path) -> None:
        self.source = str(path)
        self.size = path.stat().st_size
        try:
            self.zip = zipfile.ZipFile(path)
            names = self.zip.namelist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise ConfigError(self.source, "pt2", f"not a torch.export archive (a zip file): "
                              f"{first_line(err, 80)}") from None
        roots = {name.split("/", 1)[0] for name in names}
        if len(roots) != 1 or not all("/" in name for name in names):
            raise ConfigError(self.source, "pt2", "not a torch.export archive: its entries "
                              "do not share one root folder")
        self.root = f"{roots.pop()}/"
        self.entries = {name.removeprefix(self.root): info
                        for name, info in zip(names, self.zip.infolist(), strict=True)}

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.zip.close()

    def read(self, entry: str) -> bytes:
        """The bytes of `entry`; missing, larger than the file itself (a zip bomb: torch
        stores entries uncompressed) or damaged is one line naming it."""
        info = self.entries.get(entry)
        if info is None:
            raise ConfigError(self.source, entry, "missing; save the program with "
                              "torch.export.save")
        if info.file_size > self.size:
            raise ConfigError(self.source, entry, f"claims {info.file_size:,} bytes, more "
                              f"than the whole {self.size:,}-byte archive")
        try:
            return self.zip.read(info)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as err:
            raise ConfigError(self.source, entry, f"unreadable: {first_line(err, 80)}") \
                from None

    def json(self, entry: str) -> Any:
        try:
            return json.loads(self.read(entry))
        except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
            raise ConfigError(self.source, entry, f"not JSON: {first_line(err, 80)}") \
                from None


def _tensor(archive: Archive, entry: str, meta: Any, torch: Any) -> Any:
    """The tensor a weights/constants config describes, from its raw little-endian bytes."""
    from torch._export.serde.serialize import (
        deserialize_scalar_type,
        deserialize_size,
        deserialize_storage_offset,
        deserialize_stride,
    )

    try:
        dtype = deserialize_scalar_type(meta.dtype)
        torch.empty((), dtype=dtype)  # a dtype torch has no tensors of (a quantized one)
        size, stride = deserialize_size(meta.sizes), deserialize_stride(meta.strides)
        offset = deserialize_storage_offset(meta.storage_offset)
    except (AssertionError, KeyError, AttributeError, TypeError, RuntimeError) as err:
        raise ConfigError(archive.source, entry, f"tensor description unreadable: "
                          f"{first_line(err, 80)}") from None
    data = archive.read(entry)
    width = dtype.itemsize
    if len(data) % width or len(size) != len(stride) or \
            min((*size, *stride, offset), default=0) < 0:
        raise ConfigError(archive.source, entry, f"{len(data)} bytes do not hold a {dtype} "
                          f"tensor of size {list(size)}, stride {list(stride)}")
    # torch.export.save writes every value of a weight: one that claims more values than its
    # bytes hold (a stride of 0 over a few bytes) would be computed with, whole, when the
    # graph runs.
    reach = sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    needed = 0 if 0 in size else max(offset + 1 + reach, math.prod(size))
    if needed * width > len(data):
        raise ConfigError(archive.source, entry, f"holds {len(data)} bytes; its tensor of "
                          f"size {list(size)} needs {needed * width}")
    try:
        flat = torch.frombuffer(bytearray(data), dtype=dtype) if data else \
            torch.empty(0, dtype=dtype)
        return torch.as_strided(flat, size, stride, offset)
    except (RuntimeError, ValueError, TypeError, OverflowError) as err:  # a size past int64
        raise ConfigError(archive.source, entry, f"not a {dtype} tensor: "
                          f"{first_line(err, 80)}") from None


def _tensors(archive: Archive, config_entry: str, folder: str, torch: Any) -> dict[str, Any]:
    """The tensors of a weights or constants config, by fully qualified name; tensors that
    share a file share its storage, as torch.export.save wrote them."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import _dict_to_dataclass

    raw = archive.json(config_entry)
    check_names(raw, archive.source, config_entry)
    try:
        config = _dict_to_dataclass(schema.PayloadConfig, raw)
        items = list(config.config.items())
    except Exception as err:  # torch's dataclass reader raises whatever the JSON trips
        raise ConfigError(archive.source, config_entry, f"not a torch.export payload "
                          f"config: {first_line(err, 80)}") from None
    tensors, files = {}, {}
    for name, payload in items:
        entry = f"{folder}{payload.path_name}"
        if payload.use_pickle or payload.tensor_meta is None:
            raise ConfigError(archive.source, entry, "is a pickled object (a tensor subclass "
                              "or custom class); Archipelago never unpickles model files")
        if entry not in files:
            files[entry] = _tensor(archive, entry, payload.tensor_meta, torch)
        tensor = files[entry]
        tensors[name] = torch.nn.Parameter(tensor, requires_grad=tensor.is_floating_point()
                                           and payload.tensor_meta.requires_grad) \
            if payload.is_param else tensor
    return tensors


def _example_inputs(archive: Archive, entry: str, torch: Any) -> Any:
    """(args, kwargs) through torch's weights-only unpickler, which builds tensors and
    containers and refuses any other global (a payload's os.system) before calling it."""
    data = archive.read(entry)
    if not data:
        return None
    try:
        inputs = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:  # UnpicklingError (its cause in __context__), RuntimeError, ...
        why = first_line(err.__context__ or err, 200)
        called = re.search(r"Unsupported global: GLOBAL (\S+)", why)
        if called:  # a payload: the weights-only unpickler stopped before calling it
            raise ConfigError(archive.source, entry, f"unpickling it would call "
                              f"{elide(called.group(1), 60)}; Archipelago never unpickles "
                              "model files") from None
        raise ConfigError(archive.source, entry, f"not example inputs saved by torch: "
                          f"{elide(why, 100)}") from None
    if not (isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[0], tuple)
            and isinstance(inputs[1], dict)):
        raise ConfigError(archive.source, entry, "is not (args, kwargs) example inputs")
    sizes = [t.numel() for t in (*inputs[0], *inputs[1].values()) if isinstance(t, torch.Tensor)]
    if sum(sizes) > MAX_INPUT_ELEMENTS:
        raise ConfigError(archive.source, entry, f"example inputs of {sum(sizes):,} values; at "
                          f"most {MAX_INPUT_ELEMENTS:,} (one sample, batch size 1)")
    return inputs


def read_program(path: Path, torch: Any) -> Any:
    """The ExportedProgram saved in the .pt2 at `path`, read without unpickling anything
    beyond tensors and without running anything the archive names."""
    with Archive(path) as archive:
        return _program(archive, torch)


def _program(archive: Archive, torch: Any) -> Any:
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _dict_to_dataclass
    from torch.export.pt2_archive import constants as at

    version = archive.read(at.ARCHIVE_VERSION_PATH)
    if version != at.ARCHIVE_VERSION_VALUE.encode():
        raise ConfigError(archive.source, at.ARCHIVE_VERSION_PATH, f"archive version "
                          f"{elide(repr(version), 40)}; this torch reads "
                          f"{at.ARCHIVE_VERSION_VALUE!r}")
    if BYTEORDER in archive.entries and archive.read(BYTEORDER) != b"little":
        raise ConfigError(archive.source, BYTEORDER, "only little-endian archives are read")
    entry = at.MODELS_FILENAME_FORMAT.format(MODEL)
    program = check_program(archive.json(entry), archive.source, entry, torch)
    plain_outputs(program)
    weights = _tensors(archive, at.WEIGHTS_CONFIG_FILENAME_FORMAT.format(MODEL),
                       at.WEIGHTS_DIR, torch)
    constants = _tensors(archive, at.CONSTANTS_CONFIG_FILENAME_FORMAT.format(MODEL),
                         at.CONSTANTS_DIR, torch)
    inputs = _example_inputs(archive, at.SAMPLE_INPUTS_FILENAME_FORMAT.format(MODEL), torch)
    try:
        serialized = _dict_to_dataclass(schema.ExportedProgram, program)
        return ExportedProgramDeserializer().deserialize(serialized, weights, constants,
                                                         inputs)
    except Exception as err:  # torch's deserializer raises whatever a damaged graph trips
        raise ConfigError(archive.source, entry, f"not a program this torch reads: "
                          f"{first_line(err, 120)}") from None
