"""CPU proxies (seeds/003 §III, modelling tool): the time of each `cpu_*` call at a size,
measured with numpy on the machine Archipelago runs on (`archi proxies`) and stored, or read
from a stored profile. Lookups interpolate linearly between measured sizes.
"""

import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
VECTOR_SIZES = tuple(4 ** k for k in range(3, 11))     # 64 .. 1M elements
MATRIX_SIZES = tuple(4 ** k for k in range(4, 12))     # 256 .. 4M elements


def measure_call(name: str, size: int, repeats: int = 9, budget_s: float = 0.03) -> float:
    """Best-of-`repeats` mean time of one call (best-of rejects other processes' noise)."""
    setup, kernel = KERNELS[name]
    args = setup(size, np.random.default_rng(0))
    kernel(*args)
    start = time.perf_counter()
    kernel(*args)
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, min(10_000, int(budget_s / repeats / once)))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            kernel(*args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


@dataclass(frozen=True)
class CPUProfile:
    """Measured (size, seconds) points per call, sorted by size."""

    machine: str
    points: dict[str, tuple[tuple[int, float], ...]]

    def time_s(self, name: str, size: int) -> float:
        pts = self.points.get(name)
        if not pts:
            raise ConfigError(self.machine, name, "no proxy measured for this call")
        sizes = np.array([p[0] for p in pts], dtype=float)
        times = np.array([p[1] for p in pts])
        if size >= sizes[-1] and len(pts) > 1:  # beyond the table: the last segment's slope
            slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
            return float(times[-1] + max(slope, 0.0) * (size - sizes[-1]))
        return float(np.interp(size, sizes, times))

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine,
                "calls": {k: [list(p) for p in v] for k, v in self.points.items()}}


def measure_profile(sizes: dict[str, tuple[int, ...]] | None = None) -> CPUProfile:
    """Time every CPU call at its sizes on this machine."""
    chosen = sizes or {name: MATRIX_SIZES if name == "cpu_matvec" else VECTOR_SIZES
                       for name in KERNELS}
    points = {name: tuple((n, measure_call(name, n)) for n in ns) for name, ns in chosen.items()}
    return CPUProfile(f"{cpu_model()}, numpy {np.__version__}", points)


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
    """The (call, size) pairs a recorded program's CPU calls use, to measure exactly."""
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
    calls: dict[str, list[tuple[Annotated[int, Field(gt=0, le=2**40)],
                                Annotated[float, Field(ge=0, le=1e6)]]]]


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
    return CPUProfile(profile.machine or source, points)
