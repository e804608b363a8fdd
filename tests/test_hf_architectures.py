"""Every causal-LM architecture of the installed transformers, tiny and randomly
initialised, generates on neuron what it generates on CPU.

The sweep lives in tests/hf_architecture_sweep.py (see its docstring for how the
configs are shrunk and what is compared). This test runs it over all of
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, prints the report (counts, the neuron-only
failures and the architectures that fail on CPU too, with reasons), and asserts
that no architecture that works on CPU fails on neuron.

    python3 tests/test_hf_architectures.py [REGEX] [-v]    # the report only
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_architecture_sweep as sweep  # noqa: E402

# Guards against a sweep that compares (almost) nothing: the installed transformers 5.12 has 165
# causal-LM architectures, of which all but a handful run as tiny models on CPU.
MIN_COMPARED = 100


def test_hf_causal_lm_architectures(capsys):
    records, seconds = sweep.run_sweep(log=lambda m: print(m, file=sys.stderr, flush=True))
    report = sweep.format_report(records, seconds, verbose=True)
    with capsys.disabled():
        print("\n" + report, flush=True)
    by = sweep.summarise(records)
    compared = len(by["pass"]) + len(by["neuron-fails"])
    assert compared >= MIN_COMPARED, (
        f"only {compared} of {len(records)} architectures ran on CPU (at least {MIN_COMPARED} expected); "
        "cpu failures: " + ", ".join(f"{r['model_type']} ({sweep._reason(r)[:80]})" for r in by["cpu-fails"][:20]))
    assert not by["neuron-fails"], (
        f"{len(by['neuron-fails'])} architecture(s) work on CPU but fail on neuron: "
        + "; ".join(f"{r['model_type']}: {sweep._reason(r)[:200]}" for r in by["neuron-fails"]))


if __name__ == "__main__":
    sys.exit(sweep.main())
