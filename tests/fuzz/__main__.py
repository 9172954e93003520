"""`make fuzz`: N hostile inputs per kind (default 10,000) through the real loaders and the
plan path; prints the outcome counts per kind and exits 1 on any finding.

    python -m tests.fuzz [N] [KIND ...]
"""

import sys
import time

from tests.fuzz.harness import ALLOWED, OUTCOMES
from tests.fuzz.kinds import KINDS, fuzz_kind


def main(argv: list[str]) -> int:
    examples = int(argv[0]) if argv else 10_000
    names = argv[1:] or list(KINDS)
    print(f"{'kind':<18}" + "".join(f"{o:>10}" for o in OUTCOMES) + f"{'seconds':>10}")
    totals, found = dict.fromkeys(OUTCOMES, 0), []
    for name in names:
        start = time.perf_counter()
        counts, findings = fuzz_kind(name, examples)
        print(f"{name:<18}" + "".join(f"{counts[o]:>10}" for o in OUTCOMES)
              + f"{time.perf_counter() - start:>10.1f}", flush=True)
        for outcome in OUTCOMES:
            totals[outcome] += counts[outcome]
        found += [f"  {name}: {f}" for f in findings]
    print(f"{'total':<18}" + "".join(f"{totals[o]:>10}" for o in OUTCOMES))
    if found:
        print("findings (first few per kind):", *found, sep="\n")
    return 0 if all(totals[o] == 0 for o in OUTCOMES if o not in ALLOWED) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
