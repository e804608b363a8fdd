"""OpInfo conformance sweep: every OpInfo of PyTorch's op_db, run on CPU and on
neuron, results compared. What is checked for each (op, dtype) pair, for each
dtype in DTYPE_NAMES that the op supports on CPU, is opinfo_checks.py; this
file enumerates the pairs, runs them and reports.

The sweep runs in worker subprocesses (one per core, by default) so that a
crash or hang in one op is recorded as that pair's failure and the sweep goes
on. Usage:

    python3 tests/opinfo_sweep.py [--ops REGEX] [--dtypes float32,bool] [--workers N] [-v]
    python3 tests/test_opinfo_conformance.py          # same, the report only
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from opinfo_checks import MAX_SAMPLES, MAX_VARIANT_SAMPLES, PairRun, import_torch, pair_name, short_error

# complex64: conjugation, lazy conjugate bits and complex kernels (CUDA-like devices support it; a NeuronCore
# does not, so its ops count as CPU fallbacks, but they must give CPU's answers).
DTYPE_NAMES = ("float32", "bfloat16", "int64", "bool", "complex64")
# A worker that reports nothing for this long is killed; its pair fails as a hang.
WORKER_STALL_S = float(os.environ.get("OPINFO_SWEEP_WORKER_STALL_S", "90"))
PASS_THRESHOLD = 0.98


def all_pairs(op_db, ops_re=None, dtype_names=DTYPE_NAMES):
    torch = import_torch()
    dtypes = [getattr(torch, n) for n in dtype_names]
    pairs = []
    for i, op in enumerate(op_db):
        name = pair_name(op)
        if ops_re and not re.search(ops_re, name):
            continue
        supported = op.supported_dtypes("cpu")
        for dt in dtypes:
            if dt in supported:
                pairs.append((i, dt))
    return pairs


def worker_main(args):
    import warnings
    warnings.simplefilter("ignore")
    torch = import_torch()
    torch.set_num_threads(max(1, args.threads))
    from torch.testing._internal.common_methods_invocations import op_db
    pairs = all_pairs(op_db, args.ops, args.dtypes.split(","))
    mine = pairs[args.shard::args.nshards]
    done = set()
    if args.skip:
        with open(args.skip) as f:
            done = set(f.read().splitlines())
    out = open(args.results, "a", buffering=1)
    for i, dt in mine:
        op = op_db[i]
        key = f"{pair_name(op)}|{str(dt).replace('torch.', '')}"
        if key in done:
            continue
        out.write(json.dumps({"event": "begin", "key": key}) + "\n")
        try:
            record = PairRun(op, dt).run()
        except Exception as e:  # noqa: BLE001  a bug in the sweep itself
            record = {"op": pair_name(op), "dtype": str(dt).replace("torch.", ""), "status": "fail",
                      "checks": 1, "passed": 0, "failure": ["sweep", 0, "sweep error: " + short_error(e)],
                      "failures": [], "shape_only": None, "skips": {}, "seconds": 0,
                      "traceback": traceback.format_exc()}
        record["event"] = "end"
        record["key"] = key
        out.write(json.dumps(record) + "\n")
    out.write(json.dumps({"event": "done"}) + "\n")
    out.close()


# ----------------------------------------------------------------------------
# Parent side (no torch import needed)
# ----------------------------------------------------------------------------

def _read_records(path):
    records, begun, done = {}, None, False
    if not os.path.exists(path):
        return records, begun, done
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec["event"] == "begin":
                begun = rec["key"]
            elif rec["event"] == "end":
                records[rec["key"]] = rec
                begun = None
            elif rec["event"] == "done":
                done = True
    return records, begun, done


def run_sweep(ops=None, dtypes=DTYPE_NAMES, workers=None, log=None):
    """Runs the sweep in worker subprocesses; returns (records, seconds)."""
    start = time.monotonic()
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = workers or int(os.environ.get("OPINFO_SWEEP_WORKERS", "0")) or max(1, min(ncpu, 4))
    threads = max(1, ncpu // workers)
    tmp = tempfile.mkdtemp(prefix="opinfo_sweep_")
    procs = {}
    crashed = {}  # shard -> list of keys that crashed/hung

    def launch(shard):
        path = os.path.join(tmp, f"shard{shard}.jsonl")
        records, _, _ = _read_records(path)
        skip = os.path.join(tmp, f"shard{shard}.skip")
        with open(skip, "w") as f:
            f.write("\n".join(list(records) + crashed.get(shard, [])))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--shard", str(shard), "--nshards",
               str(workers), "--results", path, "--threads", str(threads), "--dtypes", ",".join(dtypes)]
        if ops:
            cmd += ["--ops", ops]
        cmd += ["--skip", skip]
        errlog = open(os.path.join(tmp, f"shard{shard}.stderr"), "a")
        procs[shard] = (subprocess.Popen(cmd, stdout=errlog, stderr=errlog, start_new_session=True), path)

    for s in range(workers):
        launch(s)
    last_size = {s: (0, time.monotonic()) for s in range(workers)}
    finished = set()
    while len(finished) < workers:
        time.sleep(0.5)
        for s, (p, path) in list(procs.items()):
            if s in finished:
                continue
            size = os.path.getsize(path) if os.path.exists(path) else 0
            if size != last_size[s][0]:
                last_size[s] = (size, time.monotonic())
            rc = p.poll()
            stalled = rc is None and time.monotonic() - last_size[s][1] > WORKER_STALL_S
            if stalled:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "stall"
            if rc is None:
                continue
            records, begun, done = _read_records(path)
            if done:
                finished.add(s)
                continue
            if begun is not None:
                crashed.setdefault(s, []).append(begun)
                why = (f"hang: no progress for {WORKER_STALL_S:.0f}s" if rc == "stall"
                       else f"crash: worker died with {'signal ' + str(-rc) if rc < 0 else 'exit ' + str(rc)}")
                op_name, dt = begun.rsplit("|", 1)
                with open(path, "a") as f:
                    f.write(json.dumps({"event": "end", "key": begun, "op": op_name, "dtype": dt, "status": "fail",
                                        "checks": 1, "passed": 0, "failure": ["process", 0, why], "failures": [],
                                        "shape_only": None, "skips": {}, "seconds": 0}) + "\n")
                if log:
                    log(f"[sweep] shard {s}: {begun}: {why}; restarting")
                launch(s)
                last_size[s] = (os.path.getsize(path), time.monotonic())
            else:
                # Died outside a pair (import failure?): give up on this shard.
                with open(os.path.join(tmp, f"shard{s}.stderr")) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"sweep worker {s} failed (rc={rc}) outside any pair:\n{tail}")
    records = {}
    for s in range(workers):
        records.update(_read_records(os.path.join(tmp, f"shard{s}.jsonl"))[0])
    return records, time.monotonic() - start


def normalise_reason(reason):
    r = re.sub(r"values differ \(.*", "values differ", reason)
    r = re.sub(r"0x[0-9a-f]+", "0x?", r)
    r = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", r)
    r = re.sub(r"\[N\](\[N\])*", "[i]", r)
    return r[:160]


def summarise(records):
    counted = [r for r in records.values() if r["status"] in ("pass", "fail")]
    passed = [r for r in counted if r["status"] == "pass"]
    failed = sorted((r for r in counted if r["status"] == "fail"), key=lambda r: (r["op"], r["dtype"]))
    skipped = [r for r in records.values() if r["status"] == "skip"]
    rate = len(passed) / len(counted) if counted else 0.0
    return counted, passed, failed, skipped, rate


def format_report(records, seconds, verbose=False):
    counted, passed, failed, skipped, rate = summarise(records)
    lines = []
    lines.append(f"OpInfo conformance sweep (neuron vs cpu), dtypes {', '.join(DTYPE_NAMES)}")
    lines.append(f"max {MAX_SAMPLES} samples per pair; noncontig and out= on the first {MAX_VARIANT_SAMPLES}")
    lines.append("")
    lines.append(f"FAILING (op, dtype) pairs: {len(failed)}")
    for r in failed:
        kind, idx, reason = r["failure"]
        lines.append(f"  {r['op']:<45} {r['dtype']:<9} [{kind} #{idx}] {reason}")
        if verbose:
            seen = {reason}
            for k, i, why in r["failures"][1:]:
                if why not in seen:
                    seen.add(why)
                    lines.append(f"  {'':<45} {'':<9} [{k} #{i}] {why}")
    lines.append("")
    groups = collections.defaultdict(list)
    for r in failed:
        groups[normalise_reason(r["failure"][2])].append(f"{r['op']}/{r['dtype']}")
    lines.append(f"Failures grouped by first failure reason: {len(groups)} groups")
    for reason, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  ({len(members)}) {reason}")
        lines.append("      " + ", ".join(members))
    lines.append("")
    shape_only = sorted({(r["op"], r["shape_only"]) for r in counted if r["shape_only"]})
    lines.append(f"Compared on shape/dtype/device only: {len(shape_only)} ops")
    for op_name, why in shape_only:
        lines.append(f"  {op_name}: {why}")
    lines.append("")
    overrides = sorted({(r["op"], r["dtype"], tuple(r["tolerance_override"])) for r in counted
                        if r.get("tolerance_override")})
    lines.append(f"OpInfo tolerance overrides (device vs CPU) applied: {len(overrides)} pairs")
    for op_name, dt, (rtol, atol) in overrides:
        lines.append(f"  {op_name} {dt}: rtol={rtol:g} atol={atol:g}")
    lines.append("")
    lines.append(f"Skipped pairs (no check possible): {len(skipped)}")
    for r in sorted(skipped, key=lambda r: (r["op"], r["dtype"])):
        why = "; ".join(f"{k} x{v}" for k, v in r["skips"].items()) or "no samples"
        lines.append(f"  {r['op']:<45} {r['dtype']:<9} {why[:160]}")
    skip_reasons = collections.Counter()
    for r in records.values():
        for k, v in r["skips"].items():
            skip_reasons[normalise_reason(k)] += v
    lines.append("")
    lines.append("Skipped samples/checks by reason (all pairs):")
    for k, v in skip_reasons.most_common():
        lines.append(f"  {v:6d}  {k}")
    checks = sum(r["checks"] for r in counted)
    checks_passed = sum(r["passed"] for r in counted)
    by_kind = collections.Counter()
    for r in counted:
        by_kind.update(r.get("by_kind", {}))
    lines.append("")
    lines.append("Checks made: " + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items())))
    lines.append(f"TOTAL: {len(passed)}/{len(counted)} (op, dtype) pairs pass = {100 * rate:.2f}% "
                 f"(threshold {100 * PASS_THRESHOLD:.0f}%); {len(failed)} fail, {len(skipped)} skipped; "
                 f"{checks_passed}/{checks} checks pass; {seconds:.0f}s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", help="regex on op names (op or op.variant)")
    ap.add_argument("--dtypes", default=",".join(DTYPE_NAMES))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--json", help="write the per-pair records to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every failing check, not just the first")
    # worker mode
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--nshards", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    ap.add_argument("--skip", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    records, seconds = run_sweep(args.ops, tuple(args.dtypes.split(",")), args.workers or None,
                                 log=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_report(records, seconds, args.verbose))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    rate = summarise(records)[4]
    return 0 if rate >= PASS_THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
