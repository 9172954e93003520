"""The library's keyword arguments checked by the CLI's own option declarations: each value
goes through the click parameter `archi COMMAND` declares for it (its type and its bound
callback: `--replicas` in 1..1024, `--workers` within what the machine runs), so a bound
is written once, where the CLI declares it, and both refuse alike. A refusal is one
ArchipelagoError line naming the argument, the value and what the option takes."""

from collections.abc import Mapping
from functools import cache
from typing import Any

from archipelago.errors import InvalidArgument, elide
from archipelago.lib.choices import word


@cache
def _command(name: str) -> Any:
    """`archi NAME` as a click command (typer builds the group once; typer carries its own
    click)."""
    import typer

    from archipelago.cli import app

    group = typer.main.get_command(app)
    return group, group.get_command(typer.Context(group), name)


def checked(command: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` (None: left out, the CLI's default holds) converted and bounded as `archi
    COMMAND`'s options of the same names would be, given as their command-line text; a
    name the command has no option for is passed through unchanged (the caller's own)."""
    import typer

    group, cmd = _command(command)
    params = {p.name: p for p in cmd.params}
    ctx = typer.Context(cmd, parent=typer.Context(group, info_name="archi"),
                        info_name=command)
    out = {}
    for name, value in values.items():
        param = params.get(name)
        if value is None or param is None:
            out[name] = value
            continue
        try:
            out[name] = param.process_value(ctx, word(name, value))  # as typed
        except typer.BadParameter as err:
            raise InvalidArgument(f"{name}={elide(repr(value), 60)}: "
                                  f"{elide(err.message.rstrip('.'), 160)}") from None
    return out
