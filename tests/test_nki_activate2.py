"""nisa.activate2 (NeuronCore-v4): the six tensor-scalar pairs with immediates and per-partition tiles, reversed
operands, nl.prelu's relu_param, and the register reduction (add, maximum, minimum, abs_max, abs_min) chained
across instructions, against torch in float64; each misuse refused by name."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nki_activate2_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"
ROWS, COLS = 96, 40


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _per_partition(seed):
    return [round(float(v), 3) for v in _randn(ROWS, seed=seed)]


def _stage(x, op, value, reverse):
    """x op value in float64, value a float or one value per partition."""
    v = torch.tensor(value, dtype=torch.float64).reshape(-1, 1) if isinstance(value, list) else value
    a, b = (v, x) if reverse else (x, v)
    return {"add": lambda: a + b, "subtract": lambda: a - b, "multiply": lambda: a * b, "bypass": lambda: x}[op]()


FUNCTIONS = {"copy": lambda t: t, "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid}

PAIRS = [("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
         ("subtract", "bypass"), ("bypass", "bypass")]


@pytest.mark.parametrize("op0,op1", PAIRS)
@pytest.mark.parametrize("tiles", [False, True], ids=["immediates", "per-partition"])
def test_each_pair_of_the_tensor_scalar_stage(op0, op1, tiles):
    x = _randn(ROWS, COLS)
    imm0 = _per_partition(1) if tiles else 0.75
    imm1 = _per_partition(2) if tiles else -0.5
    got = k.activate2(x.to(N), "tanh", op0, imm0, op1, imm1).cpu()
    expected = torch.tanh(_stage(_stage(x.double(), op0, imm0, False), op1, imm1, False))
    torch.testing.assert_close(got.double(), expected, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("op0,op1,reverse0,reverse1", [("subtract", "bypass", True, False),
                                                       ("multiply", "subtract", False, True),
                                                       ("multiply", "subtract", True, True)])
def test_reversed_operands_come_first(op0, op1, reverse0, reverse1):
    """reverse0: imm0 op0 data (1 - x with subtract); reverse1: imm1 op1 (b - s * x)."""
    x = _randn(ROWS, COLS, seed=3)
    got = k.activate2(x.to(N), "copy", op0, 1.0, op1, 0.25, reverse0, reverse1).cpu()
    expected = _stage(_stage(x.double(), op0, 1.0, reverse0), op1, 0.25, reverse1)
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-6)


def test_exp_of_x_minus_a_row_max_as_attention_kernels_write_it():
    x = _randn(ROWS, COLS, seed=4) * 3
    row_max = [float(v) for v in x.amax(1)]
    got = k.activate2(x.to(N), "exp", "subtract", row_max, "bypass", 0.0).cpu()
    torch.testing.assert_close(got, torch.exp(x - x.amax(1, keepdim=True)), rtol=1e-6, atol=1e-7)
    assert torch.equal(got.amax(1), torch.ones(ROWS))  # exp(0) at each row's maximum


def test_prelu_slope_applies_below_zero_only():
    """The documented example: [-1, 0, 1, 2] with relu_param 0.1 gives [-0.1, 0, 1, 2]; a per-partition
    slope gives each row its own."""
    x = torch.tensor([[-1.0, 0.0, 1.0, 2.0]]).repeat(ROWS, 1)
    got = k.activate2(x.to(N), "prelu", "bypass", 0.0, "bypass", 0.0, relu_param=0.1).cpu()
    assert torch.equal(got[0], torch.tensor([-0.1, 0.0, 1.0, 2.0]))
    slopes = _per_partition(5)
    got = k.activate2(x.to(N), "prelu", "multiply", 2.0, "add", -1.0, relu_param=slopes).cpu()
    t = x * 2 - 1
    expected = torch.where(t < 0, torch.tensor(slopes).reshape(-1, 1) * t, t)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)


def test_computed_in_fp32_and_rounded_once_to_a_bf16_dst():
    x = _randn(ROWS, COLS, seed=6)
    got = k.activate2(x.to(N), "exp", "multiply", 1.5, "add", 0.125, out_dtype="bfloat16").cpu()
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, torch.exp(x * 1.5 + 0.125).to(torch.bfloat16))


def test_the_gpsimd_engine_computes_the_same():
    x = _randn(ROWS, COLS, seed=7)
    on_scalar = k.activate2(x.to(N), "sigmoid", "multiply", 0.5, "add", 1.0).cpu()
    on_gpsimd = k.activate2(x.to(N), "sigmoid", "multiply", 0.5, "add", 1.0, engine="gpsimd").cpu()
    assert torch.equal(on_scalar, on_gpsimd)


def test_runs_on_numpy_arrays_as_the_simulator_does():
    x = _randn(ROWS, COLS, seed=8)
    got = k.activate2(x.numpy(), "copy", "multiply", 2.0, "subtract", 1.0)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, x.numpy() * 2 - 1, rtol=1e-6)


REDUCTIONS = {"add": lambda t: t.sum(1, keepdim=True), "maximum": lambda t: t.amax(1, keepdim=True),
              "minimum": lambda t: t.amin(1, keepdim=True),
              "abs_max": lambda t: t.gather(1, t.abs().argmax(1, keepdim=True)),
              "abs_min": lambda t: t.gather(1, t.abs().argmin(1, keepdim=True))}


@pytest.mark.parametrize("reduce_op", list(REDUCTIONS))
def test_a_reduction_chained_over_column_blocks(reduce_op):
    x = _randn(ROWS, 3 * COLS, seed=9)
    scaled, reduced = k.scaled_row_reduction(x.to(N), 0.125, reduce_op, 3)
    expected = x.double() * 0.125
    torch.testing.assert_close(scaled.cpu().double(), expected, rtol=0, atol=0)
    torch.testing.assert_close(reduced.cpu().double(), REDUCTIONS[reduce_op](expected), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce_op", ["maximum", "minimum", "abs_min"])
def test_reset_sets_the_identity_of_the_reduction(reduce_op):
    """After reset, a maximum over negative numbers (and a minimum over positive ones) is theirs, not 0."""
    x = -(_randn(ROWS, COLS, seed=10).abs() + 0.5)
    if reduce_op != "maximum":
        x = -x
    got = k.reset_then_reduce(x.to(N), reduce_op).cpu()
    assert torch.equal(got, REDUCTIONS[reduce_op](x))


@pytest.mark.parametrize("what,message", [
    ("pair", r"op0=add, op1=add; the supported pairs are \(multiply, add\)"),
    ("reverse", "reverse0 and reverse1 need their operator"),
    ("reduce_op", "reduce_op=multiply; it reduces with add, maximum, minimum, abs_max or abs_min"),
    ("gpsimd_reduce", "GpSimd engine: no reduction"),
    ("vector", "Scalar or the GpSimd engine, not 'vector'"),
    ("hbm", "SBUF or PSUM tiles, not HBM"),
    ("imm_dtypes", "must share a dtype"),
    ("call_bypass", "nl.bypass is the pass-through ALU operator"),
])
def test_misuse_is_refused_by_name(what, message):
    with pytest.raises(NkiError, match=message):
        k.activate2_misuse(_randn(16, 8).to(N), what)


def test_refused_before_neuroncore_v4():
    with pytest.raises(NkiError, match="NeuronCore-v4 instruction.*NeuronCore-v3"):
        k.activate2_on_trn2(_randn(16, 8).to(N))


def test_abs_max_and_abs_min_keep_the_sign_and_take_y_on_a_tie():
    """AWS's examples: abs_max(-5, 3) = -5, abs_min(5, -3) = -3, and on a tie (1, -1) both give y = -1."""
    x = torch.tensor([[-5.0, 5.0, 1.0, -2.0]])
    y = torch.tensor([[3.0, -3.0, -1.0, 2.0]])
    assert torch.equal(k.magnitude_pick(x.to(N), y.to(N), "abs_max").cpu(), torch.tensor([[-5.0, 5.0, -1.0, 2.0]]))
    assert torch.equal(k.magnitude_pick(x.to(N), y.to(N), "abs_min").cpu(), torch.tensor([[3.0, -3.0, -1.0, 2.0]]))


def test_data_may_be_an_indirect_view():
    """Tensor indirection (AWS lists activate2's data and dst): the columns an index tile picks, each partition
    group of 16 reading its own index rows."""
    data = _randn(32, 16, seed=11)
    rows = [[7 - r] for r in range(8)] + [[0]] * 8 + [[2 * r] for r in range(8)] + [[0]] * 8
    index = torch.tensor(rows, dtype=torch.int32).to(torch.uint16)
    got = k.activate2_gathered(data.to(N), index.to(N), 8, 0.5).cpu()
    picked = torch.cat([data[:16, [7, 6, 5, 4, 3, 2, 1, 0]], data[16:, [0, 2, 4, 6, 8, 10, 12, 14]]])
    torch.testing.assert_close(got, torch.exp(picked * 0.5), rtol=1e-6, atol=1e-7)


def _derivative(f):
    def df(x):
        x = x.detach().clone().requires_grad_(True)
        f(x).sum().backward()
        return x.grad
    return df


ACTIVATIONS = {
    "gelu_dx": _derivative(torch.nn.functional.gelu),
    "gelu_apprx_sigmoid_dx": _derivative(lambda t: t * torch.sigmoid(1.702 * t)),
    "silu_dx": _derivative(torch.nn.functional.silu),
    "erf_dx": _derivative(torch.erf),
    "tan": torch.tan,
    "trunc": torch.trunc,
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_functions_for_backward_kernels(name):
    """The derivatives AWS's activation table lists (gelu_dx, silu_dx, ...) and tan, trunc: against torch's
    autograd (in float64) and torch's own functions."""
    x = _randn(ROWS, COLS, seed=12) * (1.0 if name == "tan" else 3.0)
    out, direct = k.activation_of(x.to(N), name)
    expected = ACTIVATIONS[name](x.double()).float()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(out.cpu(), direct.cpu())
