"""The fuzzed input kinds: for each, a hypothesis strategy of inputs and the case that drives
them through the real code; `fuzz_kind` runs N of them and counts the outcomes."""

import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as fixed_seed
from hypothesis import strategies as st

from tests.fuzz import cases, format_inputs, inputs
from tests.fuzz.harness import ALLOWED, HANG_S, classify
from tests.fuzz.pt2_inputs import pt2_file
from tests.fuzz.schedulers import scheduler_case, scheduler_input
from tests.fuzz.store_inputs import compare_store

Kind = tuple[st.SearchStrategy[Any], Callable[[Any, Path], Any]]

LOADERS = ["cluster", "engine", "model", "profile"]
ENV_TEXT = st.one_of(st.integers(-5, 10).map(str), st.sampled_from(["abc", "", " 1", "1e3",
                                                                     "99999999999999999"]))
# --precision of an emulation: its formats, ones it does not run, and any text.
PRECISION_TEXT = st.one_of(st.sampled_from(["fp32", "fp16", "w8a8", "w4a16", "w4a8", "int8",
                                            "W8A8", "", "fp8"]), st.text(max_size=40))
ENV = st.dictionaries(st.sampled_from(["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]),
                      ENV_TEXT, max_size=4)

KINDS: dict[str, Kind] = {
    "cluster": (st.tuples(inputs.cluster_text(), st.sampled_from(sorted(cases.PLANNED))),
                lambda x, tmp: cases.cluster_case(x[0], x[1], tmp)),
    **{f"engine:{name}": (inputs.engine_config(name), partial(cases.engine_case, name))
       for name in sorted(cases.PLANNED)},
    **{f"model:{family}": (inputs.model_config(family),
                           lambda x, tmp, f=family: cases.model_case(x, f, tmp))
       for family in sorted(inputs.FAMILY_BASE)},
    "cli": (inputs.cli_args(), lambda x, tmp: cases.cli_case(x)),
    "precision": (format_inputs.precision_args(), lambda x, tmp: cases.cli_case(x)),
    "emulate-edge": (st.tuples(st.integers(-2**70, 2**70),
                               st.floats(allow_nan=True, allow_infinity=True), ENV,
                               PRECISION_TEXT),
                     lambda x, tmp: cases.emulate_edge_case(*x)),
    "dag": (inputs.dag_doc(), cases.dag_case),
    "dag-emulate": (inputs.dag_doc() | inputs.window_dag_doc(), cases.dag_emulate_case),
    "ip": (inputs.ip_doc(), cases.ip_case),
    "cluster:chef": (inputs.chef_cluster_doc(), cases.chef_cluster_case),
    "onnx": (inputs.onnx_file(), cases.onnx_case),
    "pt2": (pt2_file(), cases.pt2_case),
    "compare-store": (compare_store(), cases.compare_store_case),
    "scheduler": (scheduler_input(), scheduler_case),  # within HANG_S: its handshake's 0.3 s
    "file": (st.tuples(inputs.FILE_BYTES, st.sampled_from(LOADERS)),
             lambda x, tmp: cases.file_case(x[0], x[1], tmp)),
}


# Kinds that start processes: a case forks an FPGA process per node and runs torch (about
# 0.1 s), so they run one example in SLOW_SHARE of the count asked for, and may take up to
# SLOW_HANG_S (the emulation's own --timeout 10 s, twice for a silent rank, then its report).
SLOW = {"dag-emulate"}
SLOW_SHARE = 10
SLOW_HANG_S = 45.0


# Kinds whose cases share something (the base store's estimates, imported libraries): made
# before the first case, outside its time limit.
SETUP: dict[str, Callable[[], AbstractContextManager[Any]]] = {
    "compare-store": cases.compare_store_base,
    **{f"model:{family}": cases.config_libraries for family in sorted(inputs.FAMILY_BASE)}}


def fuzz_kind(name: str, examples: int, seed: int | None = None) -> tuple[Counter[str],
                                                                          list[str]]:
    """Outcome counts over `examples` generated inputs of kind `name` (a slow kind: one in
    SLOW_SHARE of them, at least one), and the first few findings (outcomes outside
    ALLOWED) with their input."""
    strategy, case = KINDS[name]
    with SETUP.get(name, nullcontext)():
        return _fuzz(strategy, case, examples if name not in SLOW else
                     max(1, examples // SLOW_SHARE), SLOW_HANG_S if name in SLOW else HANG_S,
                     seed)


def _fuzz(strategy: Any, case: Callable[[Any, Path], Any], examples: int, hang_s: float,
          seed: int | None) -> tuple[Counter[str], list[str]]:
    """`fuzz_kind` once its kind's shared things are up."""
    counts: Counter[str] = Counter()
    findings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="archipelago-fuzz-") as tmp:

        @settings(max_examples=examples, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(strategy)
        def run(value: Any) -> None:
            outcome, detail = classify(lambda: case(value, Path(tmp)), hang_s)
            counts[outcome] += 1
            if outcome not in ALLOWED and len(findings) < 5:
                findings.append(f"{outcome}: {detail} <- {value!r}"[:600])

        if seed is not None:
            run = fixed_seed(seed)(run)
        run()
    return counts, findings
