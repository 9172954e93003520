"""The host-program kind's own command, `archi proxies`, which the kind declares
(`PlanKind.commands`) and `archi` attaches when it starts: a typer command function whose
errors the CLI turns into one `error:` line and exit status 2."""

import json
from pathlib import Path
from typing import Annotated

import typer

from archipelago.errors import ArchipelagoError
from archipelago.output_file import output_path

# The program sizes of a model are taken from its plan on one Stratix 10 card (seeds/003's
# card) unless --cluster says otherwise.
PROXIES_CLUSTER = "1xs10-2800"


def proxies(
    model: Annotated[str | None, typer.Argument(
        help="measure at the sizes this model's program uses (nmt-luong, nmt-li, lstm, "
             "matvec); default: a grid of sizes")] = None,
    cluster: Annotated[str | None, typer.Option(
        help=f"cluster MODEL's program is planned on (default {PROXIES_CLUSTER})")] = None,
    hidden: Annotated[int | None, typer.Option(help="hidden size of MODEL")] = None,
    steps: Annotated[int | None, typer.Option(
        help="input/output steps of MODEL's program (default 50)")] = None,
    out: Annotated[Path | None, typer.Option(
        help="profile file (default ~/.cache/archipelago/cpu-proxies.json, which `plan` "
             "then uses)", parser=output_path, metavar="<path>")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Time the cpu_* calls of the host-offload API (seeds/003 Table I) with numpy on this
    machine at lengths 64 .. 64K and store them as the CPU proxies the modelling tool reads;
    print each call's fit, numpy's per-call cost apart from the per-element cost, which the
    model adds to a native call's fixed cost of a few ns."""
    from rich.console import Console

    from archipelago.strategies.host_offload.report import print_proxies
    from archipelago.strategies.host_offload.service import host_request, proxies_report

    sizing = {"cluster": cluster, "hidden": hidden, "steps": steps}
    given = {name: value for name, value in sizing.items() if value is not None}
    if model is None and given:
        raise ArchipelagoError(f"{', '.join(f'--{n}' for n in given)}: "
                               f"{'applies' if len(given) == 1 else 'apply'} only to a MODEL's "
                               "program; name the model (nmt-luong, nmt-li, lstm, matvec) or "
                               f"drop {'it' if len(given) == 1 else 'them'}")
    request = None
    if model is not None:
        options = {k: v for k, v in given.items() if k != "cluster"}
        target = PROXIES_CLUSTER if cluster is None else cluster  # "" is a bad name, not none
        request = host_request(model=model, cluster=target, **options)
    report = proxies_report(out, request)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_proxies(report, Console())
