"""Runs test suites that other projects trust on neuron and on the CPU device, and compares them.

    ./dev python3 tools/conformance.py PYTORCH_SOURCES [--files test_view_ops.py ...] [--timeout S]
                                       [--markdown OUT.md]

PYTORCH_SOURCES is a checkout of PyTorch (its test/ folder is read; nothing of it is copied here).
Each test file runs in its own pytest process per device, through torch's device-type framework
(PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu, then =neuron), with a time limit. A process that dies (a
segfault, an abort) or runs out of time does not end the run: the test it was in is counted as
crashed, and the file runs again from the next test with the crashed ones deselected. The table
gives, per file and device, tests passed / failed / skipped / crashed, and the tests that fail or
crash on neuron but pass on the CPU device.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterable, List, Optional, Tuple

DEFAULT_FILES = ["test_view_ops.py", "test_indexing.py", "test_type_promotion.py", "test_shape_ops.py",
                 "test_sort_and_select.py", "test_tensor_creation_ops.py", "test_reductions.py",
                 "test_unary_ufuncs.py", "test_binary_ufuncs.py"]
DEVICES = ("cpu", "neuron")
OUTCOMES = ("passed", "failed", "skipped", "crashed")
MAX_RESTARTS = 20  # crashes per file before the rest of the file is given up

# pytest -v writes the nodeid when a test starts and its outcome on the same line when it ends
# ("nodeid PASSED [ nn%]"); a crash leaves the nodeid without an outcome (or followed by the crash's
# own message).
_RESULT = re.compile(r"^(?P<node>\S+::\S+) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_STARTED = re.compile(r"^(?P<node>\S+\.py::\S+)(\s|$)")
_OUTCOME_OF = {"PASSED": "passed", "XPASS": "passed", "XFAIL": "passed", "FAILED": "failed", "ERROR": "failed",
               "SKIPPED": "skipped"}


def parse_verbose_log(text: str) -> Tuple[Dict[str, str], Optional[str]]:
    """Outcome of each test in a `pytest -v` log, and the test that was running when the log ended
    (a crash or a timeout), if any."""
    outcomes: Dict[str, str] = {}
    running = None
    for line in text.splitlines():
        line = line.rstrip()
        match = _RESULT.match(line)
        if match:
            outcomes[match["node"]] = _OUTCOME_OF[match["outcome"]]
            running = None
            continue
        match = _STARTED.match(line)
        if match and match["node"] not in outcomes:
            running = match["node"]
    return outcomes, running


def device_neutral(node: str) -> str:
    """The name of a test instantiated for one device, with the device taken out, so that the CPU
    and the neuron instance of a test compare: TestFooCPU::test_bar_cpu_float32 and
    TestFooNEURON::test_bar_neuron_float32 both become TestFoo<DEV>::test_bar_<dev>_float32."""
    path, _, rest = node.partition("::")
    name = os.path.basename(path)
    parts = rest.split("::")
    parts = [re.sub(r"(CPU|NEURON|PRIVATEUSE1)$", "<DEV>", p) for p in parts[:-1]] + parts[-1:]
    # instantiate_device_type_tests appends the device after the test's own name (then the dtype):
    # the last device token is the one it added.
    found = list(re.finditer(r"_(cpu|neuron|privateuse1)(?=_|$|\[)", parts[-1]))
    if found:
        last = found[-1]
        parts[-1] = parts[-1][:last.start()] + "_<dev>" + parts[-1][last.end():]
    return "::".join([name] + parts)


def first_error(text: str) -> str:
    """The first error pytest reports outside the tests (an import error while collecting, say)."""
    for line in text.splitlines():
        if line.startswith("E   "):
            return line[4:].strip()
    return ""


@dataclasses.dataclass
class FileResult:
    outcomes: Dict[str, str]  # device-neutral test name -> outcome
    seconds: float = 0.0
    note: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


def neuron_only_failures(cpu: FileResult, neuron: FileResult) -> List[Tuple[str, str]]:
    """Tests that pass on the CPU device and fail or crash on neuron, with neuron's outcome."""
    return sorted((t, o) for t, o in neuron.outcomes.items()
                  if o in ("failed", "crashed") and cpu.outcomes.get(t) == "passed")


def run_file(test_file: str, device: str, timeout: float, extra_env: Optional[Dict[str, str]] = None) -> FileResult:
    """One test file on one device, restarted after each crash with the crashed tests deselected."""
    env = {**os.environ, "PYTORCH_TESTING_DEVICE_ONLY_FOR": device, "TORCH_NEURONX_SHARE_CORES": "1",
           "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    outcomes: Dict[str, str] = {}
    crashed: List[str] = []
    start = time.perf_counter()
    note = ""
    for _ in range(MAX_RESTARTS + 1):
        command = [sys.executable, "-m", "pytest", "-v", "--tb=line", "-p", "no:cacheprovider", "-p", "no:randomly",
                   os.path.basename(test_file)] + [f"--deselect={node}" for node in crashed]
        with tempfile.TemporaryFile("w+") as log:
            try:
                process = subprocess.run(command, cwd=os.path.dirname(test_file), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, timeout=timeout)
                returncode = process.returncode
            except subprocess.TimeoutExpired:
                returncode = None
            log.seek(0)
            text = log.read()
            found, running = parse_verbose_log(text)
        outcomes.update(found)
        finished = returncode is not None and returncode >= 0 and running is None
        if finished:
            if returncode not in (0, 1):  # 2-5: interrupted, internal or usage error, nothing collected
                note = f"pytest exit code {returncode}" + (f": {first_error(text)}" if first_error(text) else "")
            break
        if running is None:  # died or timed out outside a test (collection, teardown)
            note = f"process ended with {'a timeout' if returncode is None else f'code {returncode}'} outside a test"
            break
        outcomes[running] = "crashed"
        crashed.append(running)
    else:
        note = f"gave up after {MAX_RESTARTS} crashes"
    neutral = {device_neutral(node): outcome for node, outcome in outcomes.items()}
    return FileResult(neutral, time.perf_counter() - start, note)


def markdown(results: Dict[str, Dict[str, FileResult]], listed: int = 30) -> str:
    lines = ["| file | cpu passed / failed / skipped / crashed | neuron passed / failed / skipped / crashed | "
             "neuron-only failures |", "|---|---|---|---|"]
    details = []
    for name, by_device in results.items():
        cells = []
        for device in DEVICES:
            r = by_device[device]
            cell = " / ".join(str(r.count(o)) for o in OUTCOMES)
            cells.append(cell + (f" ({r.note})" if r.note else ""))
        only = neuron_only_failures(by_device["cpu"], by_device["neuron"])
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {len(only)} |")
        if only:
            details.append(f"\n{name}, neuron-only failures ({len(only)}):")
            details += [f"- `{test}` ({outcome})" for test, outcome in only[:listed]]
            if len(only) > listed:
                details.append(f"- ... and {len(only) - listed} more")
    return "\n".join(lines + details) + "\n"


def main(argv: Iterable[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytorch_sources")
    parser.add_argument("--files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per pytest process")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(list(argv))
    results: Dict[str, Dict[str, FileResult]] = {}
    for name in args.files:
        path = os.path.join(args.pytorch_sources, "test", name)
        if not os.path.exists(path):
            print(f"{name}: not found under {args.pytorch_sources}/test", file=sys.stderr)
            continue
        results[name] = {}
        for device in DEVICES:
            r = run_file(path, device, args.timeout)
            results[name][device] = r
            print(f"{name} on {device}: " + ", ".join(f"{r.count(o)} {o}" for o in OUTCOMES) +
                  f" in {r.seconds:.0f} s" + (f" ({r.note})" if r.note else ""), flush=True)
    table = markdown(results)
    print("\n" + table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
