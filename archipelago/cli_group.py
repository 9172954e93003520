"""The command group `archi` runs under: the parser's own usage errors (an unknown option,
a missing argument, a flag given a value) end like every other user mistake, in one
`error:` line on stderr and exit status 2, instead of a framed multi-line box.

The group also holds the commands plan kinds declare (`PlanKind.commands`): they are looked
up in the registry only when `archi` lists or runs its commands, so importing the CLI
imports no kind, and the CLI's own source names none."""

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from archipelago.errors import (
    ArchipelagoError,
    elide,
    notices_on_stderr,
    signals_as_errors,
)
from archipelago.library_logs import libraries_kept


def user_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Turn ArchipelagoError into `error: ...` on stderr and exit status 2, no traceback;
    SIGINT and SIGTERM into `error: interrupted by ...` and exit status 128 + N; notices
    into one `notice: ...` line each; the libraries' own log records and warnings kept off
    the terminal (library_logs.libraries_kept)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            with signals_as_errors(), notices_on_stderr(), libraries_kept():
                command(*args, **kwargs)
        except ArchipelagoError as err:
            print(f"error: {err}", file=sys.stderr)
            raise typer.Exit(getattr(err, "exit_code", 2)) from None

    return run


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
    message = elide(err.format_message().rstrip("."), 160)  # it repeats what was typed
    return f"error: {ArchipelagoError(message)}{valid_choices(err)}{where}"


def declared_command(name: str, function: Callable[..., None]) -> Any:
    """A kind's typer command function as a click command, its errors one line."""
    single = typer.Typer(add_completion=False)
    single.command(name=name)(user_errors(function))
    return typer.main.get_command(single)


class OneLineErrorGroup(TyperGroup):
    """A TyperGroup whose `main` prints the parser's exceptions on one line, which adds the
    kinds' declared commands to its own, and lets a subclass complete each command's help
    from the registry (`describe`) the first time the command is looked up."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        from archipelago.strategies.registry import commands

        own = super().list_commands(ctx)
        return [*own, *(name for name in commands() if name not in own)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            from archipelago.strategies.registry import commands, resolve

            declared = commands().get(cmd_name)
            if declared is None:
                return None
            command = declared_command(cmd_name, resolve(declared[1]))
            self.add_command(command, cmd_name)
        if not getattr(command, "described", False):
            self.describe(cmd_name, command)
            command.described = True  # type: ignore[attr-defined]
        return command

    def describe(self, name: str, command: Any) -> None:
        """Complete `command`'s help from the registry; the base group adds nothing."""

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
        except ArchipelagoError as err:  # the registry, loaded to list the commands
            print(f"error: {err}", file=sys.stderr)
            code = 2
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)
