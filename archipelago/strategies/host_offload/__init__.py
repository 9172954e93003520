"""Intel CPU + multi-FPGA row (seeds/003): applications written with the CPU / FPGA /
communication API of Table I, weights persistent in the cards' on-chip memories.

    program    the API calls and the recorded Program (the plan's dynamic half)
    partition  row / column / RxC blocks, LSTM units split
    layout     which blocks each card holds, their overlay programs
    apps       matvec, LSTM, NMT-Luong and NMT-Li written with the API
    plan       HostPlan: layout + Program + per-card NPU designs and PCIe links
    config     the strategy's typed options (NPU design + program shape)

The host-program kind's consumers, imported only when a command needs them:
    proxies    CPU call proxies measured with numpy, stored as profiles
    estimate   the modelling tool: aggregate latency, breakdown, bottleneck calls
    sizing     fewest cards per device type for a latency target; largest persistent model
    service    names in, reports out, through the pipeline (benchmarks, tests, proxies)
    explore    `archi explore`: the largest persistent model, or cards for a latency target
    commands   `archi proxies`, the kind's own command
    report     estimates, emulations and sizings as JSON or tables
    page       the charts of `archi report` (plotly, imported only there)
The emulator is `archipelago.strategies.host_offload.emulate`; `archi build` writes the
application as C++ with its cards' programs and weights (`host_offload.emit`).

This module is the kind's registration; the planner (planner.py), its engine config
(config.py) and the model types it takes are named as paths, imported when it plans.
"""

from archipelago.strategies.options import WorkloadOption, WorkloadType
from archipelago.strategies.registry import PlanKind, register, register_kind


def no_workload() -> None:
    """A host program fixes its run (steps, beam) when it is recorded: nothing is left for
    the estimate or the emulation to be told."""


def _shaping(name: str, help_text: str, default: str, emulate: str | None = None
             ) -> WorkloadOption:
    return WorkloadOption(name, help_text, default,
                          {"emulate": emulate} if emulate else {}, role="plan")


# An emulation defaults to a short run of a small-vocabulary model: the torch reference
# stays quick, and a random model's top two words rarely tie within INT8 error.
HOST_PROGRAM = WorkloadType("host program", (
    _shaping("steps", "input and output steps the program runs", "50", emulate="8"),
    _shaping("hidden", "hidden size of nmt-luong, nmt-li, lstm; side of matvec", "1024",
             emulate="64"),
    _shaping("layers", "LSTM layers (encoder and decoder layers of an NMT)", "built-in's"),
    _shaping("vocab", "NMT source and target vocabulary", "50000", emulate="64"),
    _shaping("beam", "beam width of an NMT (1: greedy)", "luong 1, li 5"),
    _shaping("weights", "persistent, or streamed each use over pcie / from ddr4", "persistent"),
    _shaping("partition", "RxC row x column blocks of the matvec", "Nx1"),
    _shaping("cpu_profile", "CPU proxy profile (`archi proxies` writes one)", "this machine"),
    WorkloadOption("largest", "size the largest model that stays persistent", "",
                   role="job", commands=("explore",)),
    WorkloadOption("latency_target", "per card type, the fewest cards meeting TIME (10ms)",
                   "", role="job", commands=("explore",)),
), no_workload)
register_kind(PlanKind(
    "host-program", HOST_PROGRAM,
    estimator="archipelago.strategies.host_offload.estimate:estimate",
    report="archipelago.strategies.host_offload.report",
    emulator="archipelago.strategies.host_offload.emulate:emulate",
    writers="archipelago.strategies.host_offload.emit:write_build",
    explorer="archipelago.strategies.host_offload.explore:explore",
    page="archipelago.strategies.host_offload.page:page",
    floors="archipelago.strategies.host_offload.floors:floors",
    commands={"proxies": "archipelago.strategies.host_offload.commands:proxies"}))


_RECURRENT = "archipelago.models.recurrent"
# Without --cluster: the eight Stratix 10 cards of seeds/003's server.
register("persistent", "a CPU host with PCIe FPGA cards: an API program of CPU, FPGA and "
         "transfer calls, weights persistent in on-chip MRFs (seeds/003)", "host-program",
         "archipelago.strategies.host_offload.config:HostConfig",
         models=(f"{_RECURRENT}:MatvecSpec", f"{_RECURRENT}:LSTMSpec", f"{_RECURRENT}:NMTSpec"),
         default_cluster="8xs10-2800",
         )("archipelago.strategies.host_offload.planner:plan_persistent")
