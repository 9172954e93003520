"""Measures NATIVE_CALL_S (strategies/host_offload/proxies.py): the fixed cost of one call of
a compiled vector kernel, the cost the paper's C/C++ CPU APIs pay per call (seeds/003 §III,
"Software APIs": AVX-512 kernels built with icpc, Table II) in place of numpy's dispatch.

A gcc -O3 -march=native `c = a + b` kernel (vectorized; not inlined, so every call is a real
call) is timed in C at lengths 64 .. 64K, the median of 9 repeats of a loop of calls at each; the
same relative-error least squares the proxies use splits the times into a per-call and a
per-element cost. The per-element cost is printed beside the numpy profile's for cpu_add,
which the model uses, as a check that numpy's add loop runs at a compiled kernel's speed.

    python -m benchmarks.calibrate_host_native_call     # needs gcc; prints the fit
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

from archipelago.strategies.host_offload.proxies import (
    NATIVE_CALL_S,
    VECTOR_SIZES,
    fit_linear,
    load_profile,
)

KERNEL_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef const float *restrict in;
__attribute__((noinline)) void add(in a, in b, float *restrict c, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}
static double now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int cmp(const void *x, const void *y) {
    double d = *(const double *)x - *(const double *)y; return (d > 0) - (d < 0);
}
int main(int argc, char **argv) {
    for (int k = 1; k < argc; k++) {
        int n = atoi(argv[k]);
        size_t bytes = 4 * (size_t)n + 64;
        float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
        float *c = aligned_alloc(64, bytes);
        for (int i = 0; i < n; i++) { a[i] = i * 0.5f; b[i] = 1.0f - i; }
        long number = 20000000L / (n + 64) + 1;
        double times[9];
        for (int r = 0; r < 9; r++) {
            double t0 = now();
            for (long j = 0; j < number; j++) {
                add(a, b, c, n);
                __asm__ volatile("" : : "r"(c) : "memory");
            }
            times[r] = (now() - t0) / number;
        }
        qsort(times, 9, sizeof(double), cmp);
        printf("%d %.6e\n", n, times[4]);
        free(a); free(b); free(c);
    }
    return 0;
}
"""


def measure_native() -> list[tuple[int, float]]:
    """(length, seconds per call) of the compiled kernel on this machine."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise SystemExit("needs gcc (or cc) on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "add.c", Path(tmp) / "add"
        src.write_text(KERNEL_C)
        subprocess.run([compiler, "-O3", "-march=native", "-o", str(exe), str(src)], check=True)
        out = subprocess.run([str(exe), *map(str, VECTOR_SIZES)], check=True,
                             capture_output=True, text=True).stdout
    return [(int(n), float(t)) for n, t in (line.split() for line in out.splitlines())]


def main() -> None:
    points = measure_native()
    for n, t in points:
        print(f"{n:7d} elements  {t * 1e9:9.1f} ns")
    native = fit_linear(points)
    print(f"a whole {points[0][0]}-element call: {points[0][1] * 1e9:.1f} ns "
          "(NATIVE_CALL_S bounds the per-call cost by it)")
    numpy_add = load_profile().fits["cpu_add"]
    print(f"compiled add: {native.overhead_s * 1e9:.1f} ns per call + "
          f"{native.per_element_s * 1e9:.4f} ns per element")
    print(f"numpy add (profile in use): {numpy_add.overhead_s * 1e9:.1f} ns per call + "
          f"{numpy_add.per_element_s * 1e9:.4f} ns per element")
    print(f"NATIVE_CALL_S in proxies.py: {NATIVE_CALL_S * 1e9:.1f} ns")


if __name__ == "__main__":
    main()
