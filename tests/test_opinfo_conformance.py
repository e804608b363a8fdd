"""Op conformance of the neuron device against CPU over PyTorch's OpInfo database.

The sweep lives in tests/opinfo_sweep.py (workers, report) and what it compares in
tests/opinfo_checks.py. This test runs it over every OpInfo and the dtypes float32,
bfloat16, int64, bool and complex64, prints the failing (op, dtype) pairs with their first
failure reason and the totals, and asserts that at least 98% of the (op, dtype)
pairs pass.

    python3 tests/test_opinfo_conformance.py [--ops REGEX] [-v]   # the report only
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opinfo_sweep  # noqa: E402


def test_opinfo_conformance(capsys):
    records, seconds = opinfo_sweep.run_sweep(log=lambda m: print(m, file=sys.stderr, flush=True))
    report = opinfo_sweep.format_report(records, seconds)
    with capsys.disabled():
        print("\n" + report, flush=True)
    counted, passed, failed, skipped, rate = opinfo_sweep.summarise(records)
    assert counted, "the sweep compared nothing"
    assert rate >= opinfo_sweep.PASS_THRESHOLD, (
        f"{len(passed)}/{len(counted)} (op, dtype) pairs pass ({100 * rate:.2f}%), below "
        f"{100 * opinfo_sweep.PASS_THRESHOLD:.0f}%; failing: "
        + ", ".join(f"{r['op']}/{r['dtype']}" for r in failed[:40]) + (" ..." if len(failed) > 40 else ""))


if __name__ == "__main__":
    sys.exit(opinfo_sweep.main())
