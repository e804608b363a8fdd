"""What the OpInfo sweep (opinfo_sweep.py) checks for one (op, dtype) pair: each of the first
MAX_SAMPLES sample inputs of the op's OpInfo, run on CPU and on neuron, in these ways:

  contig     the sample as PyTorch builds it (strides preserved exactly)
  noncontig  every tensor of dim >= 1 replaced by a strided slice of a buffer
             twice as large (same values), on both devices (first MAX_VARIANT_SAMPLES)
  out        for ops with supports_out: out= tensors of the CPU result's
             shape/dtype, allocated on the device (first MAX_VARIANT_SAMPLES)
  out_resize out= tensors with no elements, which the op resizes (first sample)
  out_cpu    out= tensors on the CPU device with the inputs on neuron: must raise,
             as CUDA does (first sample with a tensor input of at least one dim)
  inplace    the op's in-place variant on a copy of the input, results and
             errors against CPU's (an in-place broadcast larger than self raises
             on both) (first MAX_VARIANT_SAMPLES)
  overlap    the first sample's out= (or, for the in-place variant, its first
             tensor argument) as a view that overlaps part of the input, both
             views of one storage: errors and the storage's values against
             CPU's (CPU runs that differ from each other skip it)
  mathbits   the input as a lazily conjugated (complex) or negated (float) view
             holding the same values, as PyTorch's TestMathBits does (first sample)
  grad       float32 ops with autograd: the gradients of the sum of the outputs
             with respect to every floating-point input tensor, against CPU's
             (zero-tensor gradients, such as sgn's, included) (first sample)

A check compares the results (moved back to CPU; torch.testing.assert_close with
equal_nan=True and the dtype's default tolerances) and the argument tensors
afterwards (in-place semantics). CPU raising skips the check, unless neuron
raises too, which counts as a pass. Neuron raising where CPU succeeded fails.
Random ops, ops that return uninitialised memory and ops whose CPU result
differs between two runs are compared on shape/dtype/device only.

An (op, dtype) pair passes when all its checks pass; it is skipped (not
counted) when no check could be made. Everything here runs in a sweep worker,
which imports torch.
"""
from __future__ import annotations

import collections
import itertools
import os
import re
import signal
import time

MAX_SAMPLES = int(os.environ.get("OPINFO_SWEEP_MAX_SAMPLES", "8"))
MAX_VARIANT_SAMPLES = int(os.environ.get("OPINFO_SWEEP_MAX_VARIANT_SAMPLES", "3"))
# Samples with more tensor elements than this (all tensors together) are skipped.
MAX_SAMPLE_NUMEL = int(os.environ.get("OPINFO_SWEEP_MAX_SAMPLE_NUMEL", str(1 << 21)))
SAMPLE_TIMEOUT_S = int(os.environ.get("OPINFO_SWEEP_SAMPLE_TIMEOUT_S", "20"))
# Once a pair has used this much time, no further samples are drawn for it.
PAIR_BUDGET_S = float(os.environ.get("OPINFO_SWEEP_PAIR_BUDGET_S", "20"))
# Random ops (sampling from a distribution): compared on shape/dtype/device.
# Matched on the whole op name so that normalize, __rand__, poisson_nll_loss
# or signal.windows.exponential (deterministic) keep their value checks.
RANDOM_OP_RE = re.compile(
    r"^(rand\w*|normal|bernoulli|multinomial|uniform|exponential|geometric|cauchy|log_normal|poisson"
    r"|(nn\.functional\.)?\w*dropout\w*|nn\.functional\.rrelu|svd_lowrank|pca_lowrank)$"
)
# Ops whose out= is Python that computes, then copy_()s into the out tensors: a copy between devices
# is legal, so CUDA accepts an out= on the CPU for them too (torch.functional.lu).
OUT_COPIED_IN_PYTHON = {"lu"}
# Products whose CPU kernel writes an out= that overlaps an input without checking, while still reading
# it: CPU's values then follow its GEMM's order of work. Neuron makes the product from the inputs as
# they were, then stores it (aten/ops/HotKernels.cpp), so the overlap check compares nothing here.
OVERLAP_READ_WHILE_WRITTEN_ON_CPU = {"mm", "bmm", "nn.functional.linear"}
RANDOM_OP_EXCEPTIONS = {"native_dropout_backward"}  # deterministic: takes the mask as input
# Ops whose result is (partly) uninitialised memory, beyond OpInfo.has_nondeterministic_output.
UNINITIALISED_OPS = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
                     "empty_permuted", "resize_", "resize_as_"}


# Tensor arguments that ATen requires on the CPU whatever the device (as on
# CUDA); OpInfo builds them with torch.tensor() on the CPU for every device.
CPU_RESIDENT_ARGS = {
    "tensor_split": {("args", 0)},  # tensor_indices_or_sections
}


class SampleTimeout(Exception):
    pass


class SkipSample(Exception):
    pass


def import_torch():
    import torch
    return torch


def pair_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def shape_only_reason(op):
    if op.name in RANDOM_OP_EXCEPTIONS:
        return None
    if RANDOM_OP_RE.match(op.name):
        return "random op"
    if op.has_nondeterministic_output:
        return "OpInfo.has_nondeterministic_output"
    if op.name in UNINITIALISED_OPS:
        return "returns uninitialised memory"
    return None


def iter_tensors(obj):
    torch = import_torch()
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from iter_tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from iter_tensors(x)


def check_in_scope(struct):
    """Raises SkipSample for tensors this sweep does not handle."""
    torch = import_torch()
    total = 0
    for t in iter_tensors(struct):
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise SkipSample(f"tensor subclass {type(t).__name__} (out of scope)")
        if t.layout != torch.strided:
            raise SkipSample(f"non-strided layout {t.layout} (out of scope)")
        if t.is_quantized:
            raise SkipSample("quantized tensor (out of scope)")
        if t.is_nested:
            raise SkipSample("nested tensor (out of scope)")
        if t.device.type != "cpu":
            raise SkipSample(f"sample tensor on {t.device}")
        total += t.numel()
    if total > MAX_SAMPLE_NUMEL:
        raise SkipSample(f"huge sample (> {MAX_SAMPLE_NUMEL} elements)")


def _copy_tensor(t, device, noncontig):
    """A copy of t on device with t's exact strides (or, with noncontig, a
    strided slice of a larger buffer holding the same values)."""
    torch = import_torch()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if noncontig and t.dim() >= 1 and t.numel() >= 2:
        dims = [d for d in range(t.dim()) if t.size(d) > 1]
        d = dims[-1]
        shape = list(t.shape)
        shape[d] *= 2
        base = torch.empty(shape, dtype=t.dtype, device=device)
        if t.dtype == torch.bool:
            base.fill_(True)
        elif t.dtype.is_complex or t.dtype.is_floating_point:
            base.fill_(7.25)
        else:
            base.fill_(77)
        index = [slice(None)] * t.dim()
        index[d] = slice(None, None, 2)
        view = base[tuple(index)]
        view.copy_(t)
        assert not view.is_contiguous()
        return view
    if t.numel() == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    flat = t.as_strided((span,), (1,), t.storage_offset())
    base = flat.clone() if device == "cpu" else flat.to(device)
    return base.as_strided(t.size(), t.stride(), 0)


def copy_struct(obj, device, noncontig=False):
    """Deep copy of a sample's (input, args, kwargs) for one run on device.
    Tensors are copied; CPU devices in device arguments become neuron."""
    torch = import_torch()
    if isinstance(obj, torch.Tensor):
        return _copy_tensor(obj, device, noncontig)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(copy_struct(x, device, noncontig) for x in obj))
    if isinstance(obj, tuple):
        return tuple(copy_struct(x, device, noncontig) for x in obj)
    if isinstance(obj, list):
        return [copy_struct(x, device, noncontig) for x in obj]
    if isinstance(obj, dict):
        return {k: copy_struct(v, device, noncontig) for k, v in obj.items()}
    if device != "cpu":
        if isinstance(obj, torch.device) and obj.type == "cpu":
            return torch.device(device)
        if isinstance(obj, str) and re.fullmatch(r"cpu(:\d+)?", obj):
            return device  # e.g. Tensor.to("cpu", ...): the device under test
    return obj


def leaves(obj, found):
    """obj with every floating-point tensor replaced by a leaf that requires grad (appended to found)."""
    torch = import_torch()
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            leaf = obj.detach().requires_grad_(True)
            found.append(leaf)
            return leaf
        return obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(leaves(x, found) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(leaves(x, found) for x in obj)
    if isinstance(obj, dict):
        return {k: leaves(v, found) for k, v in obj.items()}
    return obj


def gradients(op, struct):
    """d(sum of op's floating-point outputs)/d(each floating-point input), None where an input gets none."""
    torch = import_torch()
    found = []
    inp, args, kwargs = leaves(struct, found)
    results = list(iter_tensors(op(inp, *args, **kwargs)))
    if any(t.layout != torch.strided for t in results):
        raise SkipSample("grad: non-strided output (out of scope)")
    outputs = [t for t in results if t.requires_grad]
    if not found or not outputs:
        raise SkipSample("grad: no floating-point input or output")
    total = sum(o.sum() for o in outputs)
    grads = torch.autograd.grad(total, found, allow_unused=True)
    return tuple(g if g is None else g.detach() for g in grads)


def lazy_view(t):
    """t's values as a conjugate view (complex) or a negative view (floating point): the conj/neg bit set,
    the data stored conjugated or negated."""
    torch = import_torch()
    if t.dtype.is_complex:
        return t.conj_physical().conj()
    return torch._neg_view(t.neg())


def place_struct(op, struct, device, noncontig=False):
    """copy_struct, but arguments that ATen requires on the CPU for every
    device (CPU_RESIDENT_ARGS) stay there."""
    inp, args, kwargs = struct
    keep = CPU_RESIDENT_ARGS.get(op.name, ())
    new_inp = copy_struct(inp, device, noncontig)
    new_args = tuple(copy_struct(a, "cpu" if ("args", i) in keep else device, noncontig) for i, a in enumerate(args))
    new_kwargs = {k: copy_struct(v, "cpu" if ("kwargs", k) in keep else device, noncontig)
                  for k, v in kwargs.items()}
    return new_inp, new_args, new_kwargs


def short_error(exc):
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    # Drop the C++ location suffix of TORCH_CHECK messages.
    first = re.sub(r"\s*\(Triggered internally at .*", "", first)
    if len(first) > 200:
        first = first[:197] + "..."
    return f"{type(exc).__name__}: {first}"


class Mismatch(Exception):
    pass


# The upstream device-vs-CPU comparisons whose OpInfo tolerance overrides
# apply here too (test_compare_cpu: CUDA vs CPU; test_output_match: MPS vs CPU).
DEVICE_VS_CPU_TESTS = {("TestCommon", "test_compare_cpu"), ("TestConsistency", "test_output_match")}


def tolerance_override(op, dtype):
    """(rtol, atol) that the OpInfo declares for comparing a device with the
    CPU at this dtype, or None (then assert_close's dtype defaults apply)."""
    from torch.testing._internal.common_device_type import toleranceOverride
    found = []
    for d in op.decorators:
        if isinstance(d, toleranceOverride):
            decorators = [d]
        elif (getattr(d, "cls_name", None), getattr(d, "test_name", None)) in DEVICE_VS_CPU_TESTS and (
                getattr(d, "dtypes", None) is None or dtype in d.dtypes):
            decorators = [x for x in getattr(d, "decorators", ()) if isinstance(x, toleranceOverride)]
        else:
            continue
        for x in decorators:
            if dtype in x.d:
                found.append((x.d[dtype].rtol, x.d[dtype].atol))
    if not found:
        return None
    return max(r for r, _ in found), max(a for _, a in found)


def _tolerances(dtype, override):
    torch = import_torch()
    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0
    from torch.testing._comparison import default_tolerances
    rtol, atol = default_tolerances(dtype)
    if override:
        rtol, atol = max(rtol, override[0]), max(atol, override[1])
    return rtol, atol


def compare(expected, actual, shape_only, path="result", on_neuron=True, tol=None):
    """Raises Mismatch where actual (from neuron) differs from expected (CPU).
    on_neuron: result tensors must be on neuron (not for the arguments, some of
    which stay on the CPU). tol: the op's (rtol, atol) override, if any."""
    torch = import_torch()
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: expected a tensor, got {type(actual).__name__}")
        if on_neuron and actual.device.type != "neuron":
            raise Mismatch(f"{path}: result tensor on {actual.device}, expected neuron")
        if actual.layout != expected.layout:
            raise Mismatch(f"{path}: layout {actual.layout} != {expected.layout}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{path}: dtype {actual.dtype} != {expected.dtype}")
        if shape_only:
            return
        a = actual.cpu()
        try:
            rtol, atol = _tolerances(expected.dtype, tol)
            torch.testing.assert_close(a, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False,
                                       check_stride=False)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            detail = "; ".join(lines[:3])[:200]
            raise Mismatch(f"{path}: values differ ({detail})") from None
        return
    if isinstance(actual, torch.Tensor):
        raise Mismatch(f"{path}: expected {type(expected).__name__}, got a tensor")
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: expected a sequence of {len(expected)}, got {type(actual).__name__}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, shape_only, f"{path}[{i}]", on_neuron, tol)
        return
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise Mismatch(f"{path}: dict keys differ")
        for k in expected:
            compare(expected[k], actual[k], shape_only, f"{path}[{k!r}]", on_neuron, tol)
        return
    if shape_only:
        if type(actual) is not type(expected):
            raise Mismatch(f"{path}: {type(actual).__name__} != {type(expected).__name__}")
        return
    if isinstance(expected, float) and isinstance(actual, float):
        try:
            rtol, atol = _tolerances(torch.float64, tol)
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError:
            raise Mismatch(f"{path}: {actual!r} != {expected!r}") from None
        return
    if isinstance(expected, torch.device) or isinstance(actual, torch.device):
        return  # the device is meant to differ
    if isinstance(expected, str) and expected.startswith("cpu") and str(actual).startswith("neuron"):
        return
    if actual != expected:
        raise Mismatch(f"{path}: {actual!r} != {expected!r}"[:200])


def equal_runs(a, b):
    """Whether two CPU results are identical (NaNs equal); for nondeterminism detection."""
    torch = import_torch()
    try:
        if isinstance(a, torch.Tensor):
            if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return False
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, check_stride=False)
            return True
        if isinstance(a, (list, tuple)):
            return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(equal_runs, a, b))
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(equal_runs(a[k], b[k]) for k in a)
        return a == b or (a != a and b != b)
    except Exception:
        return False


class _Alarm:
    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        def handler(signum, frame):
            raise SampleTimeout(f"timed out after {self.seconds}s")
        self.old = signal.signal(signal.SIGALRM, handler)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        return False


def _call(op, struct, out=None):
    inp, args, kwargs = struct
    if out is not None:
        kwargs = dict(kwargs, out=out)
    return op(inp, *args, **kwargs)


def _empty_like_result(result, device, empty=False):
    # Zero-filled rather than empty: some CPU out= kernels read the out tensor
    # before writing all of it (fft.ihfftn with s=), and uninitialised memory
    # would make CPU and neuron differ for reasons that are not the device's.
    torch = import_torch()
    def like(r):
        return torch.zeros((0,) if empty else r.shape, dtype=r.dtype, device=device)

    if isinstance(result, torch.Tensor):
        return like(result)
    if isinstance(result, (list, tuple)) and result and all(isinstance(r, torch.Tensor) for r in result):
        return tuple(like(r) for r in result)
    raise SkipSample("out=: result is not a tensor or tuple of tensors")


class PairRun:
    """Runs the checks of one (op, dtype) pair."""

    def __init__(self, op, dtype):
        self.op = op
        self.dtype = dtype
        self.shape_only = shape_only_reason(op)
        self.nondeterminism_checked = self.shape_only is not None
        self.tol = tolerance_override(op, dtype)
        self.checks = 0
        self.passed = 0
        self.by_kind = collections.Counter()
        self.skips = collections.Counter()
        self.failure = None  # (kind, sample index, reason)
        self.failures = []

    def fail(self, kind, index, reason):
        self.failures.append((kind, index, reason))
        if self.failure is None:
            self.failure = (kind, index, reason)

    def run_check(self, kind, index, struct, cpu_reference=None):
        """One check; returns the CPU result (or None when CPU raised)."""
        torch = import_torch()
        op = self.op
        noncontig = kind == "noncontig"
        with_out = kind in ("out", "out_resize")
        call = self.op.inplace_variant if kind == "inplace" else op
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                cpu_struct = place_struct(op, struct, "cpu", noncontig)
                neu_struct = place_struct(op, struct, "neuron", noncontig)
                if kind == "mathbits":
                    cpu_struct = (lazy_view(cpu_struct[0]),) + tuple(cpu_struct[1:])
                    neu_struct = (lazy_view(neu_struct[0]),) + tuple(neu_struct[1:])
                if with_out:
                    cpu_out = _empty_like_result(cpu_reference, "cpu", empty=kind == "out_resize")
                    neu_out = _empty_like_result(cpu_reference, "neuron", empty=kind == "out_resize")
        except SkipSample as e:
            self.skips[f"{kind}: {e}"] += 1
            return None
        except Exception as e:  # noqa: BLE001
            self.checks += 1
            self.fail(kind, index, "preparing the sample on neuron: " + short_error(e))
            return None

        cpu_exc = None
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                cpu_result = _call(call, cpu_struct, cpu_out if with_out else None)
        except Exception as e:  # noqa: BLE001  (includes SampleTimeout)
            cpu_exc = e

        if cpu_exc is None and not self.nondeterminism_checked and kind == "contig":
            self.nondeterminism_checked = True
            try:
                with _Alarm(SAMPLE_TIMEOUT_S):
                    again = _call(op, place_struct(op, struct, "cpu"))
                if not equal_runs(cpu_result, again):
                    self.shape_only = "CPU result differs between runs (nondeterministic)"
            except Exception:  # noqa: BLE001
                pass

        neu_exc = None
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                neu_result = _call(call, neu_struct, neu_out if with_out else None)
        except Exception as e:  # noqa: BLE001
            neu_exc = e

        if cpu_exc is not None:
            if isinstance(cpu_exc, SampleTimeout):
                self.skips[f"{kind}: CPU timed out"] += 1
            elif neu_exc is not None:
                self.checks += 1
                self.by_kind[kind] += 1
                self.passed += 1  # both raise
            else:
                self.skips[f"{kind}: CPU raised, neuron did not"] += 1
            return None
        if any(t.layout != torch.strided for t in iter_tensors(cpu_result)):
            self.skips[f"{kind}: CPU result has a non-strided layout (out of scope)"] += 1
            return None
        self.checks += 1
        self.by_kind[kind] += 1
        if neu_exc is not None:
            self.fail(kind, index, short_error(neu_exc))
            return cpu_result
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                shape_only, tol = bool(self.shape_only), self.tol
                if with_out:
                    compare(cpu_out, neu_out, shape_only, "out", tol=tol)
                else:
                    compare(cpu_result, neu_result, shape_only, tol=tol)
                compare(cpu_struct, neu_struct, shape_only, "arguments after the call", on_neuron=False, tol=tol)
        except Mismatch as e:
            self.fail(kind, index, str(e))
            return cpu_result
        except Exception as e:  # noqa: BLE001
            self.fail(kind, index, "comparing results: " + short_error(e))
            return cpu_result
        self.passed += 1
        return cpu_result

    def run_grad(self, index, struct):
        """Gradients on neuron against CPU's; both raising counts as agreement."""
        torch = import_torch()
        outcome = {}
        for device in ("cpu", "neuron"):
            try:
                with _Alarm(SAMPLE_TIMEOUT_S):
                    outcome[device] = gradients(self.op, place_struct(self.op, struct, device))
            except SkipSample as e:
                self.skips[str(e)] += 1
                return
            except Exception as e:  # noqa: BLE001
                outcome[device] = e
        cpu, neu = outcome["cpu"], outcome["neuron"]
        if isinstance(cpu, SampleTimeout):
            self.skips["grad: CPU timed out"] += 1
            return
        self.checks += 1
        self.by_kind["grad"] += 1
        if isinstance(cpu, Exception) or isinstance(neu, Exception):
            if isinstance(cpu, Exception) and isinstance(neu, Exception):
                self.passed += 1
            elif isinstance(neu, Exception):
                self.fail("grad", index, "backward raised on neuron only: " + short_error(neu))
            else:
                self.checks -= 1
                self.by_kind["grad"] -= 1
                self.skips["grad: CPU raised, neuron did not"] += 1
            return
        try:
            for i, (c, n) in enumerate(zip(cpu, neu)):
                if (c is None) != (n is None):
                    raise Mismatch(f"grad[{i}]: {'no gradient' if n is None else 'a gradient'} on neuron only")
                if c is not None:
                    compare(c, n, False, f"grad[{i}]", tol=self.tol)
        except Mismatch as e:
            self.fail("grad", index, str(e))
            return
        self.passed += 1

    def run_out_on_cpu(self, index, struct, cpu_reference):
        """out= on the CPU device while the inputs are neuron tensors: refused, as CUDA refuses it."""
        if self.op.name in OUT_COPIED_IN_PYTHON:
            self.skips["out_cpu: out= is a copy_() in Python, legal between devices"] += 1
            return
        if not any(t.dim() >= 1 for t in iter_tensors(struct)):
            self.skips["out_cpu: no input tensor of at least one dimension"] += 1
            return
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                neu_struct = place_struct(self.op, struct, "neuron")
                cpu_out = _empty_like_result(cpu_reference, "cpu")
        except SkipSample as e:
            self.skips[f"out_cpu: {e}"] += 1
            return
        except Exception as e:  # noqa: BLE001
            self.checks += 1
            self.fail("out_cpu", index, "preparing the sample on neuron: " + short_error(e))
            return
        if not any(t.device.type == "neuron" for t in iter_tensors(neu_struct)):
            self.skips["out_cpu: every input stays on the CPU"] += 1
            return
        self.checks += 1
        self.by_kind["out_cpu"] += 1
        try:
            with _Alarm(SAMPLE_TIMEOUT_S):
                _call(self.op, neu_struct, cpu_out)
        except SampleTimeout:
            self.fail("out_cpu", index, "timed out")
            return
        except Exception:  # noqa: BLE001  refused, as it should be
            self.passed += 1
            return
        self.fail("out_cpu", index, "an out= tensor on the CPU device was accepted for neuron inputs")

    def _overlapping(self, kind, struct, device, result):
        """The sample with the written tensor and the input as views of one storage, one element apart:
        (the call's struct, the out= tensor or None, the storage)."""
        torch = import_torch()
        inp, args, kwargs = place_struct(self.op, struct, device)
        n = inp.numel()
        written_numel = result.numel() if kind == "overlap_out" else n
        storage = torch.zeros(max(n, 1 + written_numel), dtype=inp.dtype, device=device)
        shared_inp = storage[:n].view(inp.shape)
        shared_inp.copy_(inp)
        written = storage[1:1 + written_numel]
        if kind == "overlap_out":
            return (shared_inp, args, kwargs), written.view(result.shape), storage
        written = written.view(inp.shape)
        written.copy_(args[0])
        return (written, (shared_inp,) + tuple(args[1:]), kwargs), None, storage

    def run_overlap(self, kind, struct, cpu_result):
        """A written tensor overlapping part of an input: the same error as CPU, or the same values."""
        torch = import_torch()
        call = self.op.inplace_variant if kind == "overlap_inplace" else self.op
        outcomes = []
        for device in ("cpu", "cpu", "neuron"):  # CPU twice: overlapping reads may depend on timing
            try:
                with _Alarm(SAMPLE_TIMEOUT_S):
                    call_struct, out, storage = self._overlapping(kind, struct, device, cpu_result)
                    _call(call, call_struct, out)
                    outcomes.append(storage.cpu())
            except SampleTimeout:
                self.skips[f"{kind}: timed out"] += 1
                return
            except Exception as e:  # noqa: BLE001
                outcomes.append(e)
        first, again, neuron = outcomes
        if isinstance(first, Exception) != isinstance(again, Exception) or (
                not isinstance(first, Exception) and not equal_runs(first, again)):
            self.skips[f"{kind}: CPU's result depends on the run"] += 1
            return
        self.checks += 1
        self.by_kind[kind] += 1
        if isinstance(first, Exception):
            if isinstance(neuron, Exception):
                self.passed += 1
            else:
                self.fail(kind, 0, "CPU raises for a written tensor overlapping an input, neuron did not: "
                          + short_error(first))
            return
        if isinstance(neuron, Exception):
            self.fail(kind, 0, "raised on neuron only: " + short_error(neuron))
            return
        try:
            compare(first, neuron, bool(self.shape_only), "the shared storage", on_neuron=False, tol=self.tol)
        except Mismatch as e:
            self.fail(kind, 0, str(e))
            return
        self.passed += 1

    def overlap_checks(self, struct, cpu_result):
        """Which overlap checks the first sample allows (one dtype throughout, two or more elements)."""
        torch = import_torch()
        inp, args = struct[0], struct[1]
        if not isinstance(inp, torch.Tensor) or inp.numel() < 2 or self.shape_only:
            return []
        if self.op.name in OVERLAP_READ_WHILE_WRITTEN_ON_CPU:
            self.skips["overlap: CPU reads what it writes (OVERLAP_READ_WHILE_WRITTEN_ON_CPU)"] += 1
            return []
        kinds = []
        if (self.op.supports_out and isinstance(cpu_result, torch.Tensor) and cpu_result.numel() >= 2
                and cpu_result.dtype == inp.dtype):
            kinds.append("overlap_out")
        if (self.op.inplace_variant is not None and args and isinstance(args[0], torch.Tensor)
                and args[0].shape == inp.shape and args[0].dtype == inp.dtype):
            kinds.append("overlap_inplace")
        return kinds

    def run_first_sample_checks(self, struct, cpu_result):
        """The checks made on the first sample only: out= resized and on the CPU, views, gradients."""
        torch = import_torch()
        op = self.op
        if op.supports_out and cpu_result is not None:
            self.run_check("out_resize", 0, struct, cpu_reference=cpu_result)
            self.run_out_on_cpu(0, struct, cpu_result)
        first = struct[0]
        if (isinstance(first, torch.Tensor) and first.numel() > 0
                and (first.dtype.is_complex or first.dtype.is_floating_point)):
            self.run_check("mathbits", 0, struct)
        for kind in self.overlap_checks(struct, cpu_result):
            self.run_overlap(kind, struct, cpu_result)
        if self.dtype == torch.float32 and op.supports_autograd and not self.shape_only:
            self.run_grad(0, struct)

    def run(self):
        torch = import_torch()
        op, dtype = self.op, self.dtype
        start = time.monotonic()
        try:
            with _Alarm(SAMPLE_TIMEOUT_S * 2):
                samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), MAX_SAMPLES))
        except Exception as e:  # noqa: BLE001
            self.skips["generating samples raised: " + short_error(e)[:120]] += 1
            samples = []
        for index, sample in enumerate(samples):
            if time.monotonic() - start > PAIR_BUDGET_S:
                self.skips["pair time budget spent"] += len(samples) - index
                break
            struct = (sample.input, tuple(sample.args), dict(sample.kwargs))
            try:
                check_in_scope(struct)
            except SkipSample as e:
                self.skips[str(e)] += 1
                continue
            cpu_result = self.run_check("contig", index, struct)
            if index < MAX_VARIANT_SAMPLES and any(t.dim() >= 1 and t.numel() >= 2 for t in iter_tensors(struct)):
                self.run_check("noncontig", index, struct)
            if op.supports_out and index < MAX_VARIANT_SAMPLES and cpu_result is not None:
                self.run_check("out", index, struct, cpu_reference=cpu_result)
            if op.inplace_variant is not None and index < MAX_VARIANT_SAMPLES and isinstance(struct[0], torch.Tensor):
                self.run_check("inplace", index, struct)
            if index == 0:
                self.run_first_sample_checks(struct, cpu_result)
        if self.checks == 0:
            status = "skip"
        elif self.failure is None:
            status = "pass"
        else:
            status = "fail"
        return {
            "op": pair_name(op),
            "dtype": str(dtype).replace("torch.", ""),
            "status": status,
            "checks": self.checks,
            "passed": self.passed,
            "by_kind": dict(self.by_kind),
            "failure": list(self.failure) if self.failure else None,
            "failures": [list(f) for f in self.failures[:10]],
            "shape_only": self.shape_only,
            "tolerance_override": self.tol,
            "skips": dict(self.skips),
            "seconds": round(time.monotonic() - start, 3),
        }
