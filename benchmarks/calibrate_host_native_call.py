"""Measures NATIVE_CALL_S (strategies/host_offload/proxies.py): the fixed cost of one call of
a compiled vector kernel, the cost the paper's C/C++ CPU APIs pay per call (seeds/003 §III,
"Software APIs": AVX-512 kernels built with icpc, Table II) in place of numpy's dispatch.

A gcc -O3 -march=native `c = a + b` kernel (vectorized; not inlined, so every call is a real
call) is timed in C at lengths 64 .. 64K, the median of 9 repeats of a loop of calls at each; the
same relative-error least squares the proxies use splits the times into a per-call and a
per-element cost. The per-element costs are printed beside the numpy profile's, which the
model uses: cpu_add, and cpu_pickTop against a one-pass top-5 (the paper's "best known
method" for a small n; gcc leaves its branchy loop scalar).

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
#include <string.h>
#include <time.h>
typedef const float *restrict in;
__attribute__((noinline)) void add(in a, in b, float *restrict c, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}
/* the 5 largest of v, largest first, in one pass: an element enters only above the 5th */
__attribute__((noinline)) void pick_top5(in v, int n, int *restrict out) {
    float best[5]; int k = 0;
    for (int i = 0; i < n; i++) {
        float x = v[i];
        if (k == 5 && x <= best[4]) continue;
        int j = k < 5 ? k++ : 4;
        for (; j > 0 && best[j - 1] < x; j--) { best[j] = best[j - 1]; out[j] = out[j - 1]; }
        best[j] = x; out[j] = i;
    }
}
static double now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int cmp(const void *x, const void *y) {
    double d = *(const double *)x - *(const double *)y; return (d > 0) - (d < 0);
}
int main(int argc, char **argv) {
    int top = strcmp(argv[1], "pick_top5") == 0;
    for (int k = 2; k < argc; k++) {
        int n = atoi(argv[k]), idx[5];
        size_t bytes = 4 * (size_t)n + 64;
        float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
        float *c = aligned_alloc(64, bytes);
        unsigned s = 1;  /* pseudo-random values, as the numpy proxies time */
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u; a[i] = (s >> 8) / 16777216.0f - 0.5f; b[i] = 1.0f - i;
        }
        long number = 20000000L / (n + 64) + 1;
        double times[9];
        for (int r = 0; r < 9; r++) {
            double t0 = now();
            for (long j = 0; j < number; j++) {
                if (top) pick_top5(a, n, idx); else add(a, b, c, n);
                __asm__ volatile("" : : "r"(c), "r"(idx) : "memory");
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
KERNELS = {"add": "cpu_add", "pick_top5": "cpu_pickTop"}  # C kernel -> the numpy proxy


def measure_native() -> dict[str, list[tuple[int, float]]]:
    """(length, seconds per call) of each compiled kernel on this machine."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise SystemExit("needs gcc (or cc) on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "kernels.c", Path(tmp) / "kernels"
        src.write_text(KERNEL_C)
        subprocess.run([compiler, "-O3", "-march=native", "-o", str(exe), str(src)], check=True)
        out = {name: subprocess.run([str(exe), name, *map(str, VECTOR_SIZES)], check=True,
                                    capture_output=True, text=True).stdout
               for name in KERNELS}
    return {name: [(int(n), float(t)) for n, t in (line.split() for line in text.splitlines())]
            for name, text in out.items()}


def main() -> None:
    measured = measure_native()
    profile = load_profile()
    for name, points in measured.items():
        print(" ".join(f"{n}: {t * 1e9:.1f} ns" for n, t in points))
        native, numpy = fit_linear(points), profile.fits[KERNELS[name]]
        print(f"compiled {name}: {native.overhead_s * 1e9:.1f} ns per call + "
              f"{native.per_element_s * 1e9:.4f} ns per element; a whole "
              f"{points[0][0]}-element call {points[0][1] * 1e9:.1f} ns")
        print(f"numpy {KERNELS[name]} (profile in use): {numpy.overhead_s * 1e9:.1f} ns per "
              f"call + {numpy.per_element_s * 1e9:.4f} ns per element\n")
    print(f"NATIVE_CALL_S in proxies.py: {NATIVE_CALL_S * 1e9:.1f} ns (bounded by the whole "
          "64-element add)")


if __name__ == "__main__":
    main()
