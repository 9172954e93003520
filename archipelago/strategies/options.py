"""The command-line options a plan kind declares, and how their texts become its workload.

A kind's commands take the options of its `WorkloadType` beyond the ones every command has
(`--cluster`, `--strategy`, ...): `--tokens IN:OUT` for tensor parallel, `--seq-len N` for
dataflow, `--steps` for a host program, `--gantt FILE` for CHEF. Each option says where its
text goes (its role) and which commands take it; the registry refuses any other in one line.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archipelago.refs import Ref, resolved

# Where a kind option's text goes: `workload` and `output` to the kind's parser (an output
# names a file the option's `writer` writes once the estimate is made), `plan` to the engine
# parameters, `job` to the command's own runner (the emulation job, the kind's explorer),
# `cluster` to the option's `writer`, which overrides the cluster's links with it.
ROLES = ("workload", "plan", "output", "job", "cluster")
# Kind options a command sets itself, from its own options named here: `archi serve` makes
# its plan for the centre of --prompt and --output and batches up to --max-batch.
SET_BY_COMMAND = {"serve": {"tokens": "--prompt and --output", "batch": "--max-batch"}}


@dataclass(frozen=True)
class WorkloadOption:
    """One command-line option of a workload, e.g. `--tokens`; `command_defaults` overrides
    `default` per command (a short `archi emulate` keeps the reference check quick).

    `role` "plan" marks an option that shapes the plan rather than the run (a host
    program's model size, weight placement and step count, all fixed in the program it
    records): its text joins the engine parameters, validated by the strategy's config
    model, and the config's own default applies when it is left out. "output" names a file
    (`--gantt FILE`): the kind's parser checks it before any work, and the pipeline calls
    `writer` once the estimate is made. "job" goes to the command's own runner (an
    emulation's `--precision`). "cluster" overrides the cluster the plan is made on (CHEF's
    `--bandwidth`: every pair's link): `writer` names the `module:function` taking the
    resolved cluster and the text and returning the cluster to plan on. `commands` limits
    the option to some commands; any other command, like any other kind, refuses it in
    `Strategy.workload`."""

    name: str  # the flag without dashes; a keyword of the workload parser
    help: str
    default: str
    command_defaults: dict[str, str] = field(default_factory=dict)
    role: str = "workload"
    commands: tuple[str, ...] | None = None  # the commands taking it (None: every one)
    writer: str | None = None  # an output's or a cluster override's `module:attribute`

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"option '{self.name}': role '{self.role}' is not one of {ROLES}")
        if (self.role in ("output", "cluster")) != (self.writer is not None):
            raise ValueError(f"option '{self.name}': an output or a cluster override, and "
                             "only those, names its writer")

    def applies(self, command: str) -> bool:
        return self.commands is None or command in self.commands


@dataclass(frozen=True)
class WorkloadType:
    """What a plan kind's commands are asked to do, and how command-line text becomes it:
    `parse` (or its `module:attribute` path, imported when a command parses) takes
    {option name: text} and returns the workload object (raising ArchipelagoError with a
    one-line message for bad text)."""

    name: str
    options: tuple[WorkloadOption, ...]
    parse: Ref[Callable[..., Any]]

    def of(self, command: str, *roles: str) -> list[WorkloadOption]:
        """The options `command` takes in `roles`."""
        return [o for o in self.options if o.role in roles and o.applies(command)]

    def typed(self, command: str) -> list[WorkloadOption]:
        """The options a user may type to `command`: those it takes, less the ones it sets
        from its own options (`SET_BY_COMMAND`), which it refuses and its help leaves out."""
        own = SET_BY_COMMAND.get(command, {})
        return [o for o in self.of(command, *ROLES) if o.name not in own]

    def texts(self, given: dict[str, str], command: str = "plan") -> dict[str, str]:
        """Every workload option's text: the given ones, `command`'s defaults for the rest
        (plan options are left to `plan_texts`, job options to `job_texts`)."""
        run = {o.name for o in self.of(command, "workload")}
        defaults = {o.name: o.command_defaults.get(command, o.default) for o in self.options
                    if o.name in run}
        return {**defaults, **{k: v for k, v in given.items() if k in run}}

    def plan_texts(self, given: dict[str, str], command: str = "plan") -> dict[str, str]:
        """The options that shape the plan, to join the engine parameters: the given ones,
        and `command`'s own defaults where it has them (else the config's default holds)."""
        return self._given_or_command_default(given, command, "plan")

    def job_texts(self, given: dict[str, str], command: str) -> dict[str, str]:
        """The options the command's own runner takes (an emulation's precision)."""
        return self._given_or_command_default(given, command, "job")

    def outputs(self, given: dict[str, str], command: str = "plan") -> dict[str, str]:
        """{writer path: file} of the outputs given to `command`."""
        return self._written(given, command, "output")

    def cluster_overrides(self, given: dict[str, str], command: str = "plan") -> dict[str, str]:
        """{override path: text} of the cluster overrides given to `command`."""
        return self._written(given, command, "cluster")

    def _written(self, given: dict[str, str], command: str, role: str) -> dict[str, str]:
        return {o.writer: given[o.name] for o in self.of(command, role)
                if given.get(o.name) and o.writer}

    def _given_or_command_default(self, given: dict[str, str], command: str,
                                  role: str) -> dict[str, str]:
        options = self.of(command, role)
        defaults = {o.name: o.command_defaults[command] for o in options
                    if command in o.command_defaults}
        return {**defaults, **{k: v for k, v in given.items()
                               if k in {o.name for o in options}}}

    def from_args(self, given: dict[str, str], command: str = "plan") -> Any:
        """The workload object; an output's file name travels in it (the report names the
        file), checked by the kind's parser before any work."""
        outputs = {o.name for o in self.of(command, "output")}
        return resolved(self.parse)(**self.texts(given, command),
                          **{k: v for k, v in given.items() if k in outputs})


# `--precision` of a generation's plan: the number format of its weights and KV cache
# (number_formats.py), one vocabulary for every kind whose devices serve formats.
PRECISION_HELP = ("number format of the weights, activations and KV cache: fp16, bf16, fp8, "
                  "w8a8, w4a16, w4a8 (INT4 weights in groups of 128), -kv8 for an INT8 KV "
                  "cache beside 16-bit activations (int8 = w8a8, int4 = w4a16)")
PRECISION = WorkloadOption("precision", PRECISION_HELP, "fp16")
