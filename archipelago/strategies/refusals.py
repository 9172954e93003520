"""The registry's one-line refusals: a model a strategy does not plan, an option its kind
does not take, engine parameters its config rejects. Kept apart from the lookups so the
wording is read in one place; the registry hands in what it knows (which strategies take
the model, which workloads take the option), so this module imports no registry."""

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from archipelago.errors import elide
from archipelago.strategies.options import WorkloadOption, WorkloadType


def wrong_model(strategy: str, models: tuple[type, ...], spec: Any,
                takers: Sequence[str]) -> str:
    """`strategy` plans only `models`; `spec` is another type, planned by `takers`. Each
    type is named in its own words (`kind_words`; a plugin's type without them by its class
    name)."""
    others = (f"strategies for it: {', '.join(sorted(takers))}" if takers
              else "no strategy plans it")
    *most, last = dict.fromkeys(_words(t)[1] for t in models)
    plans = f"{', '.join(most)} or {last}" if most else last
    return (f"strategy '{strategy}' plans {plans}; {elide(spec.name)} is "
            f"{_words(type(spec))[0]}; {others}")


def _words(model_type: type) -> tuple[str, str]:
    return getattr(model_type, "kind_words", (f"a {model_type.__name__}", model_type.__name__))


def unknown_option(name: str, command: str, strategy: str, options: Sequence[WorkloadOption],
                   workloads: Sequence[tuple[WorkloadType, Sequence[str]]]) -> str:
    """Option `name` is not one `strategy` takes in `archi command` (it takes `options`);
    `workloads` are every kind's workload with its strategies' names, in kind-name order,
    to say who does take it."""
    takes = ", ".join(_flag(o.name) for o in options) or "no options"
    return (f"{_flag(name)} {_who_takes(name, command, workloads)}; strategy '{strategy}' "
            f"takes {takes}" + (f" in `archi {command}`" if command else ""))


def engine_refusal(strategy: str, config: type[BaseModel], err: ValidationError) -> str:
    """The first of `err`'s problems with `strategy`'s engine parameters: the key, the
    value and the constraint, and the parameters there are."""
    first = err.errors()[0]
    names = ", ".join(config.model_fields)
    key = ".".join(map(str, first["loc"]))
    if first["type"] == "extra_forbidden":
        return (f"unknown {strategy} engine parameter '{elide(key, 80)}' "
                f"(parameters: {names})")
    problem = first["msg"].removeprefix("Value error, ")
    where = (f"parameter '{elide(key, 80)}' = {elide(repr(first['input']), 80)}"
             if key else "parameters")
    return f"{strategy} engine {where}: {problem} (parameters: {names})"


def _flag(name: str) -> str:
    return "--" + elide(name.replace("_", "-"), 60)  # a user's unknown option, maybe long


def _who_takes(option: str, command: str,
               workloads: Sequence[tuple[WorkloadType, Sequence[str]]]) -> str:
    """Which strategies take `option`, and in which commands where `command` is not one."""
    takers = []
    for workload, users in workloads:
        # one name may be two options for different commands (an emulation's --precision
        # and a plan's): the kind takes it in all their commands
        named = [o for o in workload.options if o.name == option]
        if not named:
            continue
        commands = dict.fromkeys(c for o in named for c in o.commands or ())
        where = "" if any(o.applies(command) for o in named) else " in " + " and ".join(
            f"`archi {c}`" for c in commands)
        takers.append(f"{workload.name} strategies ({', '.join(users)}){where}")
    if takers:
        return f"applies to {' and '.join(takers)}"
    return "is not an option of any plan kind"
