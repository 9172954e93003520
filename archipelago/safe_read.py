"""The one way Archipelago reads a user's file: every loader (cluster and engine YAML, model
config.json, CPU proxy profiles) comes through here, so a file that is not what it claims
(a directory, a FIFO, /dev/zero, a huge or binary file, a document nested thousands deep,
a YAML alias bomb) is one ConfigError naming it instead of a hang or a traceback."""

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from archipelago.errors import ConfigError
from archipelago.yaml_loader import TooDeep, TooLarge, bounded_loader

# Input files are hand-written configurations of a few kilobytes; 16 MiB is far beyond
# any of them and still read in well under a second.
MAX_BYTES = 16 * 2**20
# Real configs nest a handful of levels (cluster -> custom_devices -> memories -> hbm).
MAX_DEPTH = 32
# Values a document may hold once YAML aliases are followed: stops "billion laughs" files,
# whose aliases expand exponentially, before any loader walks them.
MAX_VALUES = 100_000
# The safe loader (no Python tags) on libyaml's parser, composing at most this many nodes:
# every value is one node and so is each mapping key, so a document within MAX_VALUES
# composes within twice that, and one far beyond it stops there, in about a second, instead
# of being composed and constructed whole first (30 s for 15 MiB of values).
SAFE_LOADER = bounded_loader(2 * MAX_VALUES, MAX_DEPTH)
# `1e9` and `5e-324` read as the numbers YAML 1.2 makes them, not as text (YAML 1.1 wants a
# dot and a signed exponent), since numbers in user files are strict: quoted text is not
# taken for a number.
SAFE_LOADER.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a stat mode that is not a regular file is, in words ("a FIFO (named pipe)")."""
    return next((word for test, word in _KINDS if test(mode)), "not a file")


def read_text(path: Path | str, what: str = "file") -> str:
    """The UTF-8 text of the regular file `path`: checked with stat before it is opened,
    so a FIFO or device is refused without blocking, and read with a size cap."""
    source = str(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(source, what, f"is {file_kind(info.st_mode)}, not a regular file")
        if info.st_size > MAX_BYTES:
            raise ConfigError(source, what, f"is {info.st_size} bytes; the limit is "
                              f"{MAX_BYTES} bytes")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(source, what, "not found") from None
    except PermissionError:
        raise ConfigError(source, what, "permission denied (cannot read it)") from None
    except OSError as err:  # ELOOP, ENAMETOOLONG, ENOTDIR, EIO ...
        reason = err.strerror or errno.errorcode.get(err.errno or 0, "unreadable")
        raise ConfigError(source, what, f"cannot be read: {reason}") from None
    if len(data) > MAX_BYTES:  # grew while being read (procfs-like files report size 0)
        raise ConfigError(source, what, f"is larger than the limit of {MAX_BYTES} bytes")
    return decode_utf8(data, source, what)


def probe(path: Path | str, what: str = "file") -> os.stat_result | None:
    """What `path` is, or None when nothing is there. A name past the file system's limits
    or a path through something unreadable is one ConfigError (pathlib's `exists` raises
    those as OSError); a name with a NUL byte names no file (os.stat raises ValueError)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    except OSError as err:
        reason = err.strerror or errno.errorcode.get(err.errno or 0, "unreadable")
        raise ConfigError(str(path), what, f"cannot be read: {reason}") from None


def is_dir(path: Path | str, what: str = "file") -> bool:
    info = probe(path, what)
    return info is not None and stat.S_ISDIR(info.st_mode)


def decode_utf8(data: bytes, source: str, what: str = "file") -> str:
    """UTF-8 text (a leading byte-order mark is allowed); UTF-16 or binary is one line."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(source, what, "is UTF-16 encoded; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(source, what, f"is not UTF-8 text (byte 0x{data[err.start]:02x} "
                          f"at offset {err.start}); save it as UTF-8") from None


def _too_large(source: str, what: str) -> ConfigError:
    return ConfigError(source, what, f"holds more than {MAX_VALUES} values (a document "
                       "this large, or YAML aliases expanding)")


def _too_deep(source: str, what: str) -> ConfigError:
    return ConfigError(source, what, f"nests deeper than {MAX_DEPTH} levels")


def check_shape(data: Any, source: str, what: str = "file") -> Any:
    """`data` itself, once it is known to nest at most MAX_DEPTH deep and hold at most
    MAX_VALUES values (walked iteratively, so the check itself cannot recurse too deep)."""
    stack, seen = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise _too_large(source, what)
        if depth > MAX_DEPTH:
            raise _too_deep(source, what)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth + 1) for k in value if isinstance(k, tuple))
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1) for v in value)
    return data


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether `[`/`{` brackets nest deeper than `limit`: checked before parsing, since the
    YAML parser takes seconds to fail on thousands of levels. (Brackets inside quoted
    strings count too, which only matters past `limit` unclosed ones.)"""
    depth = 0
    for bracket in re.sub(r"[^\[\]{}]+", "", text):
        depth = depth + 1 if bracket in "[{" else max(depth - 1, 0)
        if depth > limit:
            return True
    return False


def unreadable_value(err: ValueError) -> str:
    """What a parser's ValueError says, without Python's advice to the programmer."""
    return f"holds a value that cannot be read: {str(err).split(';')[0]}"


def load_yaml(path: Path | str, what: str = "file") -> Any:
    """A YAML (or JSON) document, parsed by the safe loader only (no Python tags)."""
    source = str(path)
    text = read_text(path, what)
    if _flow_depth_exceeds(text, MAX_DEPTH):
        raise _too_deep(source, what)
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except TooLarge:
        raise _too_large(source, what) from None
    except TooDeep:
        raise _too_deep(source, what) from None
    except yaml.YAMLError as err:
        raise ConfigError(source, "yaml", str(err).splitlines()[0]) from None
    except ValueError as err:  # a date like 2020-02-30, an integer of over 4,300 digits
        raise ConfigError(source, what, unreadable_value(err)) from None
    except RecursionError:
        raise _too_deep(source, what) from None
    return check_shape(data, source, what)


def load_json(path: Path | str, what: str = "file") -> Any:
    """A JSON document; a syntax error names its line."""
    source = str(path)
    text = read_text(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"line {err.lineno}", f"invalid JSON: {err.msg}") from None
    except ValueError as err:  # an integer of over 4,300 digits
        raise ConfigError(source, what, unreadable_value(err)) from None
    except RecursionError:
        raise _too_deep(source, what) from None
    return check_shape(data, source, what)


def load_mapping(path: Path | str, what: str) -> dict[str, Any]:
    """A YAML (or JSON) file whose top level is a mapping with text keys."""
    data = load_yaml(path, what)
    if not isinstance(data, dict):
        raise ConfigError(str(path), what, "top level must be a mapping")
    bad = next((k for k in data if not isinstance(k, str)), None)
    if bad is not None:
        raise ConfigError(str(path), what, f"key {bad!r} is not text")
    return data
