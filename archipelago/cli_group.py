"""The command group `archi` runs under: the parser's own usage errors (an unknown option,
a missing argument, a flag given a value) end like every other user mistake, in one
`error:` line on stderr and exit status 2, instead of a framed multi-line box."""

import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from archipelago.errors import ArchipelagoError


def valid_choices(err: typer.TyperException) -> str:
    """The commands of a group, or the options of a command, when the error is an unknown
    one of them."""
    ctx = getattr(err, "ctx", None)
    if ctx is None:
        return ""
    if isinstance(ctx.command, TyperGroup) and err.format_message().startswith("No such command"):
        return f"; valid: {', '.join(ctx.command.list_commands(ctx))}"
    if hasattr(err, "possibilities"):  # an unknown option
        names = sorted(o for p in ctx.command.get_params(ctx) for o in p.opts if o.startswith("--"))
        return f"; valid: {', '.join(names)}"
    return ""


def usage_error_line(err: typer.TyperException) -> str:
    """One line naming what was wrong, the valid choices, and where help for it is."""
    ctx = getattr(err, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    message = err.format_message().rstrip(".")
    return f"error: {ArchipelagoError(message)}{valid_choices(err)}{where}"


class OneLineErrorGroup(TyperGroup):
    """A TyperGroup whose `main` prints the parser's exceptions on one line."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as err:
            print(usage_error_line(err), file=sys.stderr)
            code = err.exit_code
        except typer.Abort:
            print("error: interrupted", file=sys.stderr)
            code = 130
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)
