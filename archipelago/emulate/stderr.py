"""Torch's and gloo's own stderr on a torchrun rank: their C++ code writes to file
descriptor 2 directly (a rank that cannot join its process group prints dozens of lines of
c10 frames), so Python cannot catch it. A rank runs with descriptor 2 pointed at a
temporary file; on failure the text is summarised into the rank's one error line (its first
meaningful line), on success everything but torch's own log lines is written back."""

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# A c10 log line "[E1124 07:12:41.752190276 socket.cpp:1028] [c10d] text", a gloo source
# location "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] text"
_LOCATION = re.compile(r"^\[[^\]]*(\.cpp|\.cc|\.h):\d+\]\s*(\[c10d\]\s*)?")
# what follows a C++ exception: where it was raised, and its stack frames
_FRAME = re.compile(r"^(Exception raised from |frame #\d+:)")


def meaningful_lines(text: str) -> list[str]:
    """`text`'s lines without torch's source locations, blank lines and stack frames."""
    lines = (_LOCATION.sub("", line.strip()) for line in text.splitlines())
    return [line for line in lines if line and not _FRAME.match(line)]


class Captured:
    """What file descriptor 2 received inside `captured_stderr`."""

    def __init__(self) -> None:
        self.text = ""

    def summary(self) -> str | None:
        """The first meaningful line: torch's own message without its source location,
        never a stack frame; None when nothing meaningful was written."""
        return next(iter(meaningful_lines(self.text)), None)

    def not_torch(self) -> str:
        """The lines torch's C++ code did not write (Python's own warnings, prints)."""
        return "".join(line for line in self.text.splitlines(keepends=True)
                       if not _LOCATION.match(line.strip()) and not _FRAME.match(line.strip()))


@contextmanager
def captured_stderr() -> Iterator[Captured]:
    """Point descriptor 2 at an anonymous temporary file for the block (no file is left:
    a torchrun rank has no run directory to keep logs in), then restore it."""
    captured = Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
