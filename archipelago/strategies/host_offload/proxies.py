"""CPU proxies (seeds/003 §III, modelling tool): the time of each `cpu_*` call at a size.

Each call is timed with numpy at several vector lengths on the machine Archipelago runs on
(`archi proxies`) and stored, or read from a stored profile. A numpy call pays a fixed
dispatch cost (argument parsing, type resolution, allocating the result: 0.2 - 3 us) that
the paper's C/C++ AVX-512 kernels (§III "Software APIs") do not, and at the host program's
vector lengths that fixed cost hides the per-element cost, which is what grows with the
model (§IV: "CPU operations runtime scales linearly"). So the stored points are fitted
per call to t = overhead + n x per_element (least squares on relative error, in-cache
lengths only) and a call is priced as a native runtime's: NATIVE_CALL_S + n x per_element.
"""

import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from archipelago.errors import ConfigError
from archipelago.output_file import write_atomically
from archipelago.safe_read import load_json

Setup = Callable[[int, np.random.Generator], tuple]


def _vec(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(n).astype(np.float32)


def _square(n: int) -> tuple[int, int]:
    side = max(1, round(n ** 0.5))
    return side, max(1, n // side)


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def _pick_top(v: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n largest, largest first, ties to the lower index."""
    top = np.argpartition(-v, n - 1)[:n] if n < v.size else np.arange(v.size)
    return top[np.lexsort((top, -v[top]))]


# name -> (arguments for a size, the numpy kernel). `size` is what the Program records:
# vector length, or rows x cols for cpu_matvec.
KERNELS: dict[str, tuple[Setup, Callable[..., Any]]] = {
    "cpu_add": (lambda n, r: (_vec(n, r), _vec(n, r)), np.add),
    "cpu_mul": (lambda n, r: (_vec(n, r), _vec(n, r)), np.multiply),
    "cpu_reduce": (lambda n, r: (_vec(n, r),), np.sum),
    "cpu_dot": (lambda n, r: (_vec(n, r), _vec(n, r)), np.dot),
    "cpu_axpy": (lambda n, r: (np.float32(0.5), _vec(n, r), _vec(n, r)),
                 lambda a, x, y: a * x + y),
    "cpu_tanh": (lambda n, r: (_vec(n, r),), np.tanh),
    "cpu_exp": (lambda n, r: (_vec(n, r),), np.exp),
    "cpu_log": (lambda n, r: (np.abs(_vec(n, r)) + 1,), np.log),
    "cpu_softmax": (lambda n, r: (_vec(n, r),), _softmax),
    "cpu_matvec": (lambda n, r: (_vec(_square(n)[0], r),
                                 r.standard_normal(_square(n)).astype(np.float32)),
                   lambda v, m: v @ m),
    "cpu_pickTop": (lambda n, r: (_vec(n, r), min(5, n)), _pick_top),
    "cpu_embed": (lambda n, r: (r.standard_normal((64, n)).astype(np.float32), 7),
                  lambda table, i: table[i].copy()),
    "cpu_concat": (lambda n, r: (_vec(n // 2, r), _vec(n - n // 2, r)),
                   lambda a, b: np.concatenate((a, b))),
}
# The measuring grid: lengths from where numpy's dispatch dominates (64) to where the
# per-element cost is 10 - 60x it (64K), all cache-resident (64K float32 = 256 KiB per
# vector, within the 1 MiB L2 per core of Table II's Xeon Gold 6132; Intel ARK).
VECTOR_SIZES = tuple(2 ** k for k in range(6, 17))     # 64 .. 64K elements
MATRIX_SIZES = tuple(2 ** k for k in range(8, 17))     # 256 .. 64K elements (16^2 .. 256^2)
# Longer points (a profile may hold them) are left out of the fit: beyond the L2 the
# per-element cost is DRAM's, not the kernel's; the host program's vectors are at most the
# 50K-word vocabulary and its matrices 50 x hidden.
FIT_MAX_ELEMENTS = 2 ** 16
# A native call's fixed cost (call, loop prologue, vector tail). Measured by
# benchmarks/calibrate_host_native_call.py on the development host (AMD EPYC, gcc 12 -O3
# -march=native, a non-inlined c = a + b): a whole 64-element call takes 1.7 ns and the fitted
# per-call intercept is below 0.1 ns, so 2 ns bounds it; ~1% of numpy's dispatch (0.2 - 3 us).
NATIVE_CALL_S = 2e-9


def measure_call(name: str, size: int, repeats: int = 9, budget_s: float = 0.03) -> float:
    """Median over `repeats` of the mean time of one call in a loop long enough to time
    (the median ignores the repeats another process on a shared core disturbed)."""
    setup, kernel = KERNELS[name]
    args = setup(size, np.random.default_rng(0))
    kernel(*args)
    start = time.perf_counter()
    kernel(*args)
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, min(10_000, int(budget_s / repeats / once)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            kernel(*args)
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times))


@dataclass(frozen=True)
class LinearFit:
    """t = overhead_s + n x per_element_s over the sizes `low` .. `high` it was fitted on."""

    overhead_s: float
    per_element_s: float
    low: int
    high: int


def fit_linear(points: Iterable[tuple[int, float]]) -> LinearFit:
    """Least squares of t = a + b n on relative error (weights 1/t^2), so the short lengths
    pin the overhead and the long ones the slope; both kept >= 0 (a negative one is refitted
    as zero). Points longer than FIT_MAX_ELEMENTS are left out unless fewer than two sizes
    would remain. Exact on exactly linear points."""
    pts = sorted(points)
    inside = [p for p in pts if p[0] <= FIT_MAX_ELEMENTS]
    used = inside if len({n for n, _ in inside}) >= 2 else pts[:2]
    if len({n for n, _ in used}) < 2:
        raise ValueError("a linear fit needs times at two sizes or more")
    scale = float(used[-1][0])  # n / scale in (0, 1] keeps the normal equations well posed
    s0 = sx = sxx = st = sxt = 0.0
    for n, t in used:
        w, x = 1.0 / max(t, 1e-15) ** 2, n / scale
        s0, sx, sxx, st, sxt = s0 + w, sx + w * x, sxx + w * x * x, st + w * t, sxt + w * x * t
    det = s0 * sxx - sx * sx
    a, b = (sxx * st - sx * sxt) / det, (s0 * sxt - sx * st) / det
    if b < 0:
        a, b = st / s0, 0.0
    elif a < 0:
        a, b = 0.0, sxt / sxx
    return LinearFit(a, b / scale, used[0][0], used[-1][0])


@dataclass(frozen=True)
class CPUProfile:
    """Measured (size, seconds) points per call, sorted by size, and their fits. `native`
    False prices numpy's own calls (fitted per-call cost kept), what the proxies priced
    before they were fitted (issue 20): benchmarks/predictions_host_offload.py compares."""

    machine: str
    points: dict[str, tuple[tuple[int, float], ...]]
    native: bool = True
    source: str = ""  # the file it was read from: errors name it, not `machine`'s text

    @cached_property
    def fits(self) -> dict[str, LinearFit]:
        return {name: fit_linear(pts) for name, pts in self.points.items()}

    def time_s(self, name: str, size: int) -> float:
        """A native runtime's time for the call at `size` elements: its fixed cost plus the
        measured per-element cost (numpy's fixed cost instead when not `native`)."""
        fit = self.fits.get(name)
        if fit is None:
            raise ConfigError(self.source or f"CPU profile of {self.machine}", f"calls.{name}",
                              "no proxy measured for this call")
        call_s = NATIVE_CALL_S if self.native else fit.overhead_s
        return call_s + fit.per_element_s * size

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine,
                "calls": {k: [list(p) for p in v] for k, v in self.points.items()}}


def measure_profile(sizes: dict[str, tuple[int, ...]] | None = None) -> CPUProfile:
    """Time the CPU calls on this machine over the fit grid, plus the lengths `sizes` names
    per call (then only those calls)."""
    chosen = sizes or {name: () for name in KERNELS}
    points = {name: tuple((n, measure_call(name, n)) for n in sorted({*grid_of(name), *ns}))
              for name, ns in chosen.items()}
    return CPUProfile(f"{cpu_model()}, numpy {np.__version__}", points)


def grid_of(name: str) -> tuple[int, ...]:
    return MATRIX_SIZES if name == "cpu_matvec" else VECTOR_SIZES


def cpu_model() -> str:
    """The CPU's model name where Linux tells it, else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def program_sizes(calls: Iterable[Any]) -> dict[str, tuple[int, ...]]:
    """The (call, size) pairs a recorded program's CPU calls use, measured beside the grid
    so that a profile holds the times of the calls the model prices."""
    sizes: dict[str, set[int]] = {}
    for call in calls:
        if call.name in KERNELS:
            sizes.setdefault(call.name, set()).add(max(call.elements, 1))
    return {name: tuple(sorted(ns)) for name, ns in sizes.items()}


def merged(base: CPUProfile, new: CPUProfile) -> CPUProfile:
    """`base` with `new`'s points added (a size measured again takes the new time)."""
    points = {name: dict(pts) for name, pts in base.points.items()}
    for name, pts in new.points.items():
        points.setdefault(name, {}).update(dict(pts))
    return CPUProfile(new.machine, {k: tuple(sorted(v.items())) for k, v in points.items()})


def default_profile_path() -> Path:
    """Where `archi proxies` stores this machine's profile unless told otherwise."""
    home = os.environ.get("ARCHIPELAGO_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "archipelago") / "cpu-proxies.json"


def save_profile(profile: CPUProfile, path: Path, option: str = "profile") -> None:
    """Replaced in one step (readers never see half a profile), in a directory that exists:
    `option` names the path in errors."""
    write_atomically(path, json.dumps(profile.to_dict(), indent=1) + "\n", option, force=True)


class _ProfileFile(BaseModel):
    """A stored profile as a user may hand it over: (size, seconds) points per call."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    machine: str | None = None
    # strict: a size or time written `true` or "128" is an error naming it, not 1 or 128
    calls: dict[str, list[tuple[Annotated[int, Strict(), Field(gt=0, le=2**40)],
                                Annotated[float, Strict(), Field(ge=0, le=1e6)]]]]


def load_profile(path: Path | None = None) -> CPUProfile:
    """A stored profile: `path`, else this machine's (`archi proxies` wrote it), else the one
    measured on the development host and shipped with Archipelago."""
    if path is None and default_profile_path().exists():
        path = default_profile_path()
    if path is None:
        raw = json.loads(resources.files("archipelago.strategies.host_offload").joinpath(
            "profiles/dev-host.json").read_text())
        source = "profiles/dev-host.json"
    else:
        source = str(path)
        raw = load_json(path, "profile")
    if not isinstance(raw, dict):
        raise ConfigError(source, "profile", "top level must be a JSON object")
    try:
        profile = _ProfileFile.model_validate(raw)
    except ValidationError as err:
        raise ConfigError.from_validation(source, err, whole="profile") from None
    points = {name: tuple(sorted(pts)) for name, pts in profile.calls.items()}
    unknown = sorted(set(points) - set(KERNELS))
    if unknown:
        raise ConfigError(source, "calls", f"unknown API call(s) {', '.join(unknown)}; "
                          f"valid: {', '.join(KERNELS)}")
    for name, pts in points.items():
        if len({n for n, _ in pts}) < 2:
            raise ConfigError(source, f"calls.{name}", "needs times at two sizes or more, to "
                              "tell the per-call cost from the per-element cost")
    return CPUProfile(profile.machine or source, points, source=source)
