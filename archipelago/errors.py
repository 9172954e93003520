"""One exception family, so the CLI can print any user mistake on one line and exit 2."""

import signal
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

# A message is read on one terminal line or two: about 300 characters (issue 25).
MESSAGE_LIMIT = 300
# Characters of a user's value an error line repeats (a name, a list, a path): enough to
# recognise it, while the whole line stays within MESSAGE_LIMIT.
ELIDE_LIMIT = 120
# What the CLI prints before a message (cli_group.user_errors).
ERROR_PREFIX = "error: "


def elide(text: str, limit: int = ELIDE_LIMIT) -> str:
    """`text` whole when at most `limit` characters, else its start and end around a mark
    saying how much was left out (" ... " where the mark itself would not fit): a 20,000-item
    list or a 5,000-character name in an error stays recognisable and the line short."""
    if len(text) <= limit:
        return text
    mark = f"...[{len(text):,} characters]..."
    if len(mark) + 2 > limit:
        mark = " ... "
    keep = max(limit - len(mark), 2)
    return f"{text[:(keep + 1) // 2]}{mark}{text[len(text) - keep // 2:]}"


def first_line(err: BaseException, limit: int = ELIDE_LIMIT) -> str:
    """What a library's exception says, as one elided line: its first non-blank line (torch
    appends C++ frames and advice after it), or its type when it says nothing."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return elide(lines[0] if lines else type(err).__name__, limit)


class ArchipelagoError(Exception):
    """Base of every error caused by user input; its message is meant to be shown as is."""

    def __str__(self) -> str:
        """One line whatever the user typed: control characters (a newline or carriage
        return inside a name or a YAML key) are shown escaped."""
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in super().__str__())


def some_choices(choices: list[str], room: int, listed_by: str | None = None) -> str:
    """`choices` joined by commas within about `room` characters: as many whole names as
    fit, then how many were left out ("... (41 more; `archi catalog` lists them)"), so a
    registry of a hundred names still reads on one line."""
    tail = (lambda n: f" ... ({n:,} more; `{listed_by}` lists them)") if listed_by else \
        (lambda n: f" ... ({n:,} more)")
    shown: list[str] = []
    used = 0
    for index, choice in enumerate(choices):
        rest = len(choices) - index - 1
        need = used + len(choice) + (2 if shown else 0)
        if need + (len(tail(rest)) if rest else 0) > room:
            break
        shown.append(choice)
        used = need
    left = len(choices) - len(shown)
    return ", ".join(shown) + (tail(left) if left else "") if shown else \
        elide(", ".join(choices), room)


class UnknownNameError(ArchipelagoError):
    """A model, device, strategy or other registry name that does not exist; the valid
    choices it lists fit the line (`listed_by`: the command that lists them all)."""

    def __init__(self, kind: str, name: str, choices: Iterable[str],
                 listed_by: str | None = None) -> None:
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        head = f"unknown {kind} '{elide(name)}'; valid choices: "
        room = max(MESSAGE_LIMIT - len(head) - len(ERROR_PREFIX), 60)  # the CLI's line
        super().__init__(head + some_choices(self.choices, room, listed_by))


def elide_path(path: str, limit: int = ELIDE_LIMIT) -> str:
    """`path` cut in its directories where it is long, its file name kept whole where that
    fits (the name is what a user recognises); else cut like any text."""
    if len(path) <= limit:
        return path
    name = path.rsplit("/", 1)[-1]
    mark = f"...[{len(path):,} characters]..."
    head = limit - len(mark) - len(name) - 1
    if head < 8:
        return elide(path, limit)
    return f"{path[:head]}{mark}/{name}"


class ConfigError(ArchipelagoError):
    """A malformed input file; names the file and the offending field (both elided when
    long: a path or a YAML key is the user's text)."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source, self.field = source, field
        super().__init__(f"{elide_path(source)}: field '{elide(field)}': {problem}")

    @classmethod
    def from_validation(cls, source: str, err: Any, prefix: str = "",
                        whole: str = "config") -> "ConfigError":
        """The first problem of a pydantic ValidationError, at its dotted field path
        (`prefix.` before it; `whole` when the model as a whole is at fault)."""
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or whole
        problem = first["msg"].removeprefix("Value error, ")
        if first["loc"] and first["type"] != "missing":
            problem += f" (got {elide(repr(first.get('input')), 60)})"
        return cls(source, f"{prefix}.{field}" if prefix else field, problem)


class Notice(UserWarning):
    """An assumption made on the user's behalf: the CLI prints it once as a `notice:` line
    on stderr (`notices_on_stderr`)."""


@contextmanager
def notices_on_stderr() -> Iterator[None]:
    """Show each distinct Notice once, as one `notice: ...` line on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("once", Notice)
        show = warnings.showwarning

        def one_line(message: Warning | str, category: type[Warning], *args: Any,
                     **kwargs: Any) -> None:
            if issubclass(category, Notice):
                print(f"notice: {message}", file=sys.stderr)
            else:
                show(message, category, *args, **kwargs)

        warnings.showwarning = one_line
        yield


class PartitionError(ArchipelagoError):
    """A split that the chosen strategy cannot make on the chosen cluster."""


class InvalidArgument(ArchipelagoError):
    """A keyword argument of the Python API (docs/python.md) that the CLI's declaration of
    the same option refuses (a bound, a type)."""


class Interrupted(ArchipelagoError):
    """The user stopped a command with a signal; the exit status is 128 + its number."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


@contextmanager
def signals_as_errors(aftermath: str = "") -> Iterator[None]:
    """While inside, SIGINT and SIGTERM end the work as Interrupted ("interrupted by SIGINT"
    plus `aftermath`), which the CLI prints as one line: typer turns a KeyboardInterrupt
    into a silent exit 130, and SIGTERM's default kills without a word. SIGTERM is caught
    only in the main thread, the one Python delivers signals to."""

    def terminated(signum: int, _frame: object) -> None:
        raise Interrupted(f"interrupted by SIGTERM{aftermath}", signum)

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted by SIGINT{aftermath}", signal.SIGINT) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
