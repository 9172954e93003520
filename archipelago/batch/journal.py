"""An append-only JSON-lines file of results that concurrent runs share and killed runs cannot
corrupt: a header line says what the results are of (kind and identity, so a resumed run never
mixes in another question's answers), then one `{"key", "value"}` line per result. Every
append is one write under an exclusive `flock`, then fsync: a run killed mid-write leaves at
most a torn last line, which readers ignore and the next writer cuts off."""

import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.safe_read import file_kind

FORMAT = 1  # the header's "journal" value; a newer layout gets a new number
HEADER_MAX = 2**20  # bytes read looking for the header's end: real headers are < 1 KiB
# How long `buffered` holds results before appending them: an append costs an fsync (~4 ms
# on this machine's disk), as long as several estimates, so one per result would dominate;
# a run killed outright loses at most this much work.
FLUSH_S = 0.25
ADVICE = "move it away to start afresh"
_HEAD = b'{"journal":'  # how every header line starts


# Every line's encoder, made once (json.dumps with these options makes one a call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def _dumps(obj: Any) -> bytes:
    """One line of ASCII JSON: escapes keep any newline or control character inside it."""
    return (_ENCODER.encode(obj) + "\n").encode("ascii")


def _reason(err: OSError) -> str:
    return err.strerror or errno.errorcode.get(err.errno or 0, "unreadable")


class Journal:
    """One results file; `Journal.open` makes or checks it. The object remembers how far it
    has read, so `records()` and each append read only what other writers added since."""

    def __init__(self, path: Path, header: dict[str, Any], inode: tuple[int, int],
                 offset: int) -> None:
        self.path = path
        self.kind: str = header["kind"]
        self.identity: dict[str, str] = header["identity"]
        self.labels: dict[str, Any] = header["labels"]
        self._inode = inode
        self._offset = offset  # end of the last complete line read
        self._lines = 1  # complete lines read, the header included
        self._tail = 0  # bytes after `_offset`: a line being written, or a torn one
        self._records: dict[str, dict[str, Any]] = {}

    @classmethod
    def open(cls, path: Path | str, kind: str, identity: Mapping[str, str],
             labels: Mapping[str, Any] | None = None) -> "Journal":
        """The journal at `path`, created with this header when absent or empty (its
        directory must exist); an existing one must hold results of this kind and identity
        (`labels` only describe the results and are not compared)."""
        path = Path(path)
        line = _dumps({"journal": FORMAT, "kind": kind, "identity": dict(identity),
                       "labels": dict(labels or {})})
        header = json.loads(line)  # as a reader sees it: a tuple given is a list read back
        with _locked(path, create=True) as fd:
            info = os.fstat(fd)
            first = os.pread(fd, HEADER_MAX, 0)
            end = first.find(b"\n")
            # Under the lock, a file with no complete line is new, or its creator died
            # writing the header (no record can follow an unfinished header).
            if end < 0 and (_HEAD.startswith(first) or first.startswith(_HEAD)):
                os.ftruncate(fd, 0)
                _write_all(fd, line)
                os.fsync(fd)
                _sync_directory(path.parent)
                end = len(line) - 1
            else:
                header = _check_header(path, first[:end] if end >= 0 else first, header)
            journal = cls(path, header, (info.st_dev, info.st_ino), end + 1)
            journal._catch_up(fd)
        return journal

    def records(self) -> dict[str, dict[str, Any]]:
        """The latest value of every key; a torn last line (a writer killed mid-line, or one
        still writing) is left out."""
        with self._opened(os.O_RDONLY) as fd:
            self._catch_up(fd)
        return dict(self._records)

    def append(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Add every `(key, value)`, in one write; a later value of a key replaces it, and
        a value the journal already holds for its key (another run of the same question
        appended it meanwhile) is not written again."""
        data = list(zip(*_record_lines(items), strict=True))
        with self._opened(os.O_RDWR | os.O_APPEND, lock=True) as fd:
            self._write(fd, data, as_given=False)

    @contextmanager
    def buffered(self, flush_s: float = FLUSH_S) -> Iterator[Callable[[str, dict[str, Any]],
                                                                      None]]:
        """Yields `add(key, value)`, which appends results in one write at most every
        `flush_s` seconds; what is left is appended on leaving, an exception (a signal
        stopping the run) included."""
        pending: list[tuple[str, dict[str, Any]]] = []
        last = time.monotonic()

        def add(key: str, value: dict[str, Any]) -> None:
            nonlocal last
            pending.append((key, value))
            if time.monotonic() - last >= flush_s:
                self.append(pending)
                pending.clear()
                last = time.monotonic()

        try:
            yield add
        finally:
            if pending:
                self.append(pending)

    def append_within(self, items: Sequence[tuple[str, dict[str, Any]]], budget: int) -> int:
        """Append the longest leading run of `items` that keeps the number of distinct keys
        at most `budget`, counting under the lock what every other writer has appended, so
        concurrent runs sharing a budget never overshoot it. Returns how many went in. The
        values are JSON's own types (dicts, lists, strings, numbers, booleans, None), which
        read back as themselves: they are taken in as given, not parsed back."""
        data = list(zip(*_record_lines(items), strict=True))
        with self._opened(os.O_RDWR | os.O_APPEND, lock=True) as fd:
            self._catch_up(fd)
            keys, taken = set(self._records), 0
            for key, _ in items:
                if key not in keys and len(keys) >= budget:
                    break
                keys.add(key)
                taken += 1
            self._write(fd, data[:taken], as_given=True)
        return taken

    def _write(self, fd: int, data: list[tuple[str, bytes, Any]], as_given: bool) -> None:
        """Under the lock: cut a torn tail, append in one write the lines of `data` (key,
        line, value) that say something new of their key, fsync, take them in (the values
        `as_given`, or read back from the lines)."""
        self._catch_up(fd)
        if self._tail:
            os.ftruncate(fd, self._offset)
            self._tail = 0
        held = {item[0]: _record_line(item[0], self._records[item[0]]) for item in data
                if item[0] in self._records}
        new = []
        for item in data:
            if held.get(item[0]) != item[1]:
                new.append(item)
                held[item[0]] = item[1]
        block = b"".join(item[1] for item in new)
        _write_all(fd, block)
        os.fsync(fd)
        if os.fstat(fd).st_size == self._offset + len(block):
            self._read_own(new, as_given)  # under the lock, nothing else was added
        else:
            self._catch_up(fd)

    def _read_own(self, items: list[tuple[str, bytes, Any]], as_given: bool) -> None:
        """Take in the complete lines (key, line, value) this object just appended, as a
        reader reads them back: the values `as_given` (JSON's own types), else the lines'
        JSON values, in one parse (`_record_line` made them)."""
        if as_given:
            self._records.update((item[0], item[2]) for item in items)
        else:
            for record in json.loads(b"[" + b",".join(item[1] for item in items) + b"]"):
                self._records[record["key"]] = record["value"]
        self._lines += len(items)
        self._offset += sum(len(item[1]) for item in items)

    @contextmanager
    def _opened(self, flags: int, lock: bool = False) -> Iterator[int]:
        """The journal's file, refused if it is no longer the one opened (moved or replaced
        meanwhile: appending to another file would split the results)."""
        with _locked(self.path, flags=flags, lock=lock) as fd:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self._inode:
                raise ArchipelagoError(f"journal {self.path} was replaced while in use; "
                                       "run again to continue in the file now there")
            yield fd

    def _catch_up(self, fd: int) -> None:
        """Read the complete lines other writers appended since the last read."""
        size = os.fstat(fd).st_size
        if size < self._offset:
            raise ArchipelagoError(f"journal {self.path} was cut short while in use (now "
                                   f"{size} bytes, {self._offset} were read); {ADVICE}")
        data = os.pread(fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        for text in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            key, value = _parse_record(self.path, self._lines, text)
            self._records[key] = value
        self._offset += end
        self._tail = len(data) - end


_NEXT = b',{"key":'  # what joins two records in a list of them (`_record_lines`)


def _record_lines(items: Sequence[tuple[str, dict[str, Any]]]
                  ) -> tuple[list[str], list[bytes], list[dict[str, Any]]]:
    """(keys, lines, values) of `items`, the lines as `_record_line` makes them, encoded as
    one list and cut there: a JSON string escapes each quote in it, so `_NEXT` occurs
    elsewhere only in a list of records nested in a value, which makes more pieces than
    records (then each is encoded alone)."""
    keys = [item[0] for item in items]
    values = [item[1] for item in items]
    for key, value in items:
        _check_record(key, value)
    text = _ENCODER.encode([{"key": key, "value": value} for key, value in items])
    pieces = text.encode("ascii")[1:-1].split(_NEXT)
    if len(pieces) != len(items) or not items:
        return keys, [_record_line(key, value) for key, value in items], values
    return keys, [pieces[0] + b"\n", *(b'{"key":' + piece + b"\n" for piece in pieces[1:])], \
        values


def _check_record(key: str, value: dict[str, Any]) -> None:
    if not isinstance(key, str) or not isinstance(value, dict):
        raise TypeError(f"a journal record is (str, dict), not ({type(key).__name__}, "
                        f"{type(value).__name__})")


def _record_line(key: str, value: dict[str, Any]) -> bytes:
    _check_record(key, value)
    return _dumps({"key": key, "value": value})


def _parse_record(path: Path, number: int, text: bytes) -> tuple[str, dict[str, Any]]:
    """The key and value of line `number`, or one line naming the file, line and field."""
    where = f"journal {path} line {number}"
    try:
        record = json.loads(text)
    except UnicodeDecodeError:
        raise ArchipelagoError(f"{where} is damaged (not UTF-8); {ADVICE}") from None
    except json.JSONDecodeError as err:
        raise ArchipelagoError(f"{where} is damaged ({err.msg} at column {err.colno}); "
                               f"{ADVICE}") from None
    except (ValueError, RecursionError) as err:  # a 5,000-digit number; nesting too deep
        raise ArchipelagoError(f"{where} is damaged ({str(err)[:60]}); {ADVICE}") from None
    if not isinstance(record, dict):
        raise ArchipelagoError(f"{where} is not a record (a JSON {type(record).__name__}); "
                               f"{ADVICE}")
    for field, kind in (("key", str), ("value", dict)):
        if not isinstance(record.get(field), kind):
            problem = "is missing" if field not in record else f"is not a {kind.__name__}"
            raise ArchipelagoError(f"{where}: field '{field}' {problem}; {ADVICE}")
    return record["key"], record["value"]


def _check_header(path: Path, text: bytes, want: dict[str, Any]) -> dict[str, Any]:
    """The header `text` holds, if it is one of `want`'s kind and identity; else one line
    naming the first field that differs, or saying the file is not a journal."""
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or "journal" not in header:
        raise ArchipelagoError(f"{path} is not an Archipelago journal (its first line is not "
                               "a journal header); give another file name")
    if header["journal"] != FORMAT:
        raise ArchipelagoError(f"journal {path}: field 'journal' is {header['journal']!r}; "
                               f"this Archipelago reads format {FORMAT} only")
    if not isinstance(header.get("identity"), dict) or not isinstance(header.get("labels"),
                                                                      dict):
        raise ArchipelagoError(f"journal {path}: its header lacks 'identity' or 'labels'; "
                               f"{ADVICE}")
    theirs = {"kind": header.get("kind")} | {f"identity.{k}": v
                                               for k, v in header["identity"].items()}
    ours = {"kind": want["kind"]} | {f"identity.{k}": v for k, v in want["identity"].items()}
    for field in ["kind", *sorted(set(theirs) | set(ours) - {"kind"})]:
        if theirs.get(field) != ours.get(field):
            raise ArchipelagoError(
                f"journal {path} holds other results: field '{field}' is "
                f"{_shown(theirs, field)} there, {_shown(ours, field)} here; give another "
                "file name")
    return header


def _shown(values: dict[str, Any], field: str) -> str:
    return repr(values[field])[:60] if field in values else "absent"


@contextmanager
def _locked(path: Path, create: bool = False, flags: int = os.O_RDWR | os.O_APPEND,
            lock: bool = True) -> Iterator[int]:
    """`path` opened (without blocking on a FIFO) and, with `lock`, held under an exclusive
    flock; anything but a regular file, or an unopenable one, is one line naming it."""
    flags |= os.O_NONBLOCK | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:
        missing = ("was removed while in use" if not create else
                   f"cannot be made: directory {path.parent} does not exist")
        raise ArchipelagoError(f"journal {path} {missing}") from None
    except IsADirectoryError:
        raise ArchipelagoError(f"journal {path} is a directory; give a file name") from None
    except OSError as err:
        raise ArchipelagoError(f"journal {path}: {_reason(err)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ArchipelagoError(f"journal {path} is {file_kind(mode)}, not a regular file; "
                                   "give a file name")
        if lock:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # also releases the lock


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` (a write may take fewer bytes than given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sync_directory(directory: Path) -> None:
    """Make a new file's name durable too, not only its contents."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
