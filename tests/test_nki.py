"""NKI kernels on neuron: both API generations run unchanged, results against
torch on the CPU device, every hardware check firing on a kernel that breaks
it, sentinels, the trace cache in memory and on disk, and the import names."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from conftest import check_ok, run_python

import nki_bad_kernels as bad  # noqa: E402
import nki_kernels as k  # noqa: E402
from torch_neuronx.nki import NkiError


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def test_spmd_grid_addition_on_neuron():
    torch.manual_seed(0)
    a, b = torch.randn(512, 256), torch.randn(512, 256)
    out = k.add_grid[4](neuron(a), neuron(b))
    assert out.device.type == "neuron" and out.shape == (512, 256)
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


def test_transpose_through_psum():
    x = torch.arange(64 * 96, dtype=torch.float32).reshape(64, 96)
    out = k.transpose_tile(neuron(x))
    torch.testing.assert_close(out.cpu(), x.T.contiguous(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tiled_matmul_current_api(dtype):
    torch.manual_seed(1)
    lhsT, rhs = torch.randn(256, 256).to(dtype), torch.randn(256, 1024).to(dtype)
    out = k.matmul_tiled(neuron(lhsT), neuron(rhs))
    # The Tensor engine multiplies the stored values exactly and accumulates in fp32.
    reference = (lhsT.float().T @ rhs.float()).to(dtype)
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-3)


def test_matmul_steps_from_one_tile_to_blocked():
    torch.manual_seed(11)
    lhsT, rhs = torch.randn(128, 128).to(torch.bfloat16), torch.randn(128, 512).to(torch.bfloat16)
    one = k.matmul_one_tile(neuron(lhsT), neuron(rhs))
    torch.testing.assert_close(one.cpu(), (lhsT.float().T @ rhs.float()).to(torch.bfloat16), rtol=1e-2, atol=1e-2)
    lhsT, rhs = torch.randn(256, 384).to(torch.bfloat16), torch.randn(256, 1024).to(torch.bfloat16)
    tiled = k.matmul_tiled(neuron(lhsT), neuron(rhs))
    blocked = k.matmul_blocked(neuron(lhsT), neuron(rhs))
    assert torch.equal(blocked.cpu(), tiled.cpu())  # the same products, in the same order per element
    torch.testing.assert_close(blocked.cpu(), (lhsT.float().T @ rhs.float()).to(torch.bfloat16), rtol=1e-2,
                               atol=1e-2)
    # Blocking loads each tile once: fewer DMA bytes for the same result.
    def dma_bytes(name):
        return _prediction_of(name).dma_bytes
    assert dma_bytes("matmul_blocked") < dma_bytes("matmul_tiled")


@pytest.mark.parametrize("K,M,N", [(128, 100, 512), (72, 100, 200), (128, 128, 512), (7, 33, 5), (128, 64, 96)])
def test_one_bf16_matmul_of_any_tile_shape(K, M, N):
    """One nc_matmul whose result rows split into bands across threads (the last one short) and whose
    contraction and columns do not fill whole tiles of the host's tile unit: against an fp32 product."""
    torch.manual_seed(K + M + N)
    lhsT, rhs = torch.randn(K, M).to(torch.bfloat16), torch.randn(K, N).to(torch.bfloat16)
    got = k.matmul_one_tile(neuron(lhsT), neuron(rhs))
    torch.testing.assert_close(got.cpu(), (lhsT.float().T @ rhs.float()).to(torch.bfloat16), rtol=1e-2, atol=1e-2)


def test_tiled_matmul_beta_api():
    torch.manual_seed(2)
    lhsT, rhs = torch.randn(512, 128), torch.randn(512, 512)
    out = k.matmul_beta(neuron(lhsT), neuron(rhs))
    torch.testing.assert_close(out.cpu(), lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_masked_ragged_tiles_with_numpy_arrays():
    x = np.random.default_rng(3).standard_normal((250, 64)).astype(np.float32)
    out = k.exp_ragged(x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)


def test_nki_simulate_runs_a_kernel_a_function_and_a_grid_launch():
    import nki

    a = np.arange(512 * 8, dtype=np.float32).reshape(512, 8)
    b = np.ones((512, 8), dtype=np.float32)
    out = nki.simulate(k.add_grid[4])(a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, a + 1)
    x = np.random.default_rng(5).standard_normal((130, 16)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k.exp_ragged)(x), np.exp(x), rtol=1e-6)
    # A plain function is jitted; CPU tensors come back as CPU tensors.
    result = nki.simulate(k.exp_ragged.fn)(torch.from_numpy(x))
    assert isinstance(result, torch.Tensor) and result.device.type == "cpu"
    torch.testing.assert_close(result, torch.from_numpy(np.exp(x)), rtol=1e-6, atol=0)


def test_rmsnorm_matches_transformers_formula():
    torch.manual_seed(4)
    x, weight = torch.randn(256, 512), torch.randn(512)
    out = k.rmsnorm(neuron(x), neuron(weight))
    reference = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-5, atol=1e-5)


def test_scan_along_the_free_axis():
    torch.manual_seed(5)
    decay, inputs = torch.rand(128, 64), torch.randn(128, 64)
    out = k.decay_scan(neuron(decay), neuron(inputs))
    h, expected = torch.zeros(128), []
    for t in range(64):
        h = decay[:, t] * h + inputs[:, t]
        expected.append(h)
    torch.testing.assert_close(out.cpu(), torch.stack(expected, 1), rtol=1e-5, atol=1e-5)


def test_kernel_writes_its_input_in_place():
    a, b = np.ones((128, 8), np.float32), np.full((128, 8), 2.0, np.float32)
    assert k.add_in_place(a, b) is None
    np.testing.assert_array_equal(a, 3.0)
    t = neuron(torch.ones(128, 8))
    k.add_in_place(t, neuron(torch.ones(128, 8)))
    assert torch.equal(t.cpu(), torch.full((128, 8), 2.0))


def test_outputs_are_freed_when_dropped():
    """A dropped output returns its memory at once, not when the cyclic garbage collector next runs
    (an output held in a reference cycle kept device memory and fresh pages busy for every call)."""
    import gc
    x = neuron(torch.randn(256, 64))
    k.copy_through_sbuf(x)
    gc.collect()
    gc.disable()
    try:
        before = torch.neuron.memory_allocated()
        for _ in range(3):
            out = k.copy_through_sbuf(x)
            assert torch.equal(out.cpu(), x.cpu())
            del out
        assert torch.neuron.memory_allocated() == before
    finally:
        gc.enable()


@pytest.mark.parametrize("kernel, args, message", [
    (bad.too_many_partitions, [(256, 4)], "256 partitions"),
    (bad.psum_too_wide, [], "at most one 2 KiB bank"),
    (bad.moving_too_wide, [(128, 128), (128, 1024)], "moving free size 1024 exceeds 512"),
    (bad.engine_reads_hbm, [(128, 4)], "Vector engine cannot read HBM"),
    (bad.carried_dependency, [(128, 4)], "loop-carried dependency"),
    (bad.slice_out_of_bounds, [(128, 128)], "outside"),
    (bad.sbuf_overflow, [(128, 4)], "live SBUF tensors need"),
    (bad.nine_psum_banks, [(128, 4)], "need 9 banks"),
    (bad.gpsimd_reads_psum, [(128, 4)], "GpSimd engine cannot reach PSUM"),
])
def test_each_hardware_check_names_kernel_line_and_limit(kernel, args, message):
    tensors = [neuron(torch.zeros(shape)) for shape in args]
    with pytest.raises(NkiError) as error:
        kernel(*tensors)
    text = str(error.value)
    assert message in text and f"kernel '{kernel.__name__}'" in text and "nki_bad_kernels.py:" in text, text


def test_matmul_dtype_rule():
    with pytest.raises(NkiError, match="floating-point tiles, not int8"):
        bad.integer_matmul(neuron(torch.zeros(128, 128, dtype=torch.int8)),
                           neuron(torch.zeros(128, 128, dtype=torch.int8)))


def test_sbuf_capacity_depends_on_the_generation():
    # 240 KiB live per partition: over a NeuronCore-v3's 224 KiB, within a v4's 256 KiB.
    x = neuron(torch.zeros(128, 4))
    trn3 = type(bad.sbuf_overflow)(bad.sbuf_overflow.fn, platform_target="trn3")
    assert torch.equal(trn3(x).cpu(), torch.zeros(128, 4))


def test_fresh_tiles_hold_nan():
    out = bad.read_before_write(neuron(torch.ones(128, 4)))
    assert torch.isnan(out.cpu()).all()


def test_float64_is_refused():
    with pytest.raises(NkiError, match="float64"):
        k.add_grid[1](torch.zeros(128, 4, dtype=torch.float64), torch.zeros(128, 4, dtype=torch.float64))


def test_traced_once_per_signature():
    kernel = type(k.transpose_tile)(k.transpose_tile.fn)
    for _ in range(3):
        kernel(neuron(torch.zeros(32, 16)))
    kernel(neuron(torch.zeros(16, 32)))
    assert kernel.traces + kernel.disk_loads == 2


def test_second_process_loads_the_program_from_disk(tmp_path):
    code = f"""
        import sys, torch
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import nki_kernels as k
        x = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8).to("neuron")
        assert torch.equal(k.transpose_tile(x).cpu(), x.cpu().T)
        print(k.transpose_tile.traces, k.transpose_tile.disk_loads)
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    assert check_ok(run_python(code, env)).split() == ["1", "0"]
    assert check_ok(run_python(code, env)).split() == ["0", "1"]


_HELPERS = """
import nki.language as nl
SCALE = {scale}
def scale_tile(tile):
    return nl.multiply(tile, SCALE)
"""
_INNER = """
import nki, nki.language as nl
@nki.jit
def add_offset(a, out):
    nl.store(out, value=nl.add(nl.load(a), {offset}))
"""
_OUTER = """
import nki, nki.language as nl
import helpers, inner
@nki.jit
def scaled_plus(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=helpers.scale_tile(nl.load(a)))
    inner.add_offset(out, out)
    return out
"""


def test_an_edit_to_any_file_a_trace_ran_retraces(tmp_path):
    """A program on disk is used again only while every file its trace ran is unchanged: a helper
    module's constant or an inner @nki.jit kernel edited in another file gives the new answer, not the
    stale program's."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "outer.py").write_text(_OUTER)
    code = f"""
        import sys, torch
        sys.path.insert(0, {str(src)!r})
        import outer
        y = outer.scaled_plus(torch.ones(128, 4).to("neuron")).cpu()
        print(float(y[0, 0]), outer.scaled_plus.traces, outer.scaled_plus.disk_loads)
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache")}

    def run(scale, offset):
        (src / "helpers.py").write_text(_HELPERS.format(scale=scale))
        (src / "inner.py").write_text(_INNER.format(offset=offset))
        return check_ok(run_python(code, env)).split()

    assert run(2.0, 1.0) == ["3.0", "1", "0"]
    assert run(2.0, 1.0) == ["3.0", "0", "1"]  # nothing changed: loaded
    assert run(5.0, 1.0) == ["6.0", "1", "0"]  # the helper module's constant
    assert run(5.0, 10.0) == ["15.0", "1", "0"]  # the inner kernel, in a third file
    assert run(5.0, 10.0) == ["15.0", "0", "1"]


def test_a_kernel_from_a_string_is_not_kept_on_disk(tmp_path):
    """Code that is in no file (python -c, a notebook cell) cannot be checked for edits: its programs stay
    in memory, and the next process traces again."""
    code = """
        import torch, nki, nki.language as nl
        @nki.jit
        def double(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.multiply(nl.load(a), 2.0))
            return out
        y = double(torch.ones(128, 4).to("neuron")).cpu()
        print(float(y[0, 0]), double.traces, double.disk_loads)
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    assert check_ok(run_python(code, env)).split() == ["2.0", "1", "0"]
    assert check_ok(run_python(code, env)).split() == ["2.0", "1", "0"]


def test_a_real_nki_installation_wins(tmp_path):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    code = """
        import torch, nki, neuronxcc.nki.language as nl
        print(getattr(nki, "REAL", False), nl.tile_size.pmax)
    """
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    assert check_ok(run_python(code, env)).split() == ["True", "128"]


def test_import_names_resolve_before_torch_through_the_startup_hook():
    import site
    hook = "torch-neuronx-nki-names.pth"
    if not any(os.path.exists(os.path.join(d, hook)) for d in site.getsitepackages()):
        pytest.skip(f"no {hook} in this interpreter's site-packages: it is the host's own python3 with torch "
                    "(env/provision.sh puts the hook in the project's environment, setup.py in a pip install)")
    code = """
        import sys
        light = "torch" not in sys.modules  # the hook itself imports nothing heavy
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        import numpy as np

        @nki.jit
        def double(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.multiply(nl.load(x), 2.0))
            return out

        print(light, float(double(np.arange(12, dtype=np.float32).reshape(4, 3)).sum()))
    """
    assert check_ok(run_python(code)).split() == ["True", "132.0"]


def test_nki_outside_a_kernel_is_an_error():
    import nki.language as nl
    with pytest.raises(NkiError, match="only inside a kernel"):
        nl.ndarray((128, 4), nl.float32)
    assert math.isclose(nl.tile_size.gemm_moving_fmax, 512)


# ---- NKI kernels as torch operators -------------------------------------------------------------

from torch_neuronx import nki_op  # noqa: E402


@nki_op("nki_tests::rmsnorm")
def rmsnorm_op(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return k.rmsnorm(x, weight)


@nki_op("nki_tests::multiply")
def multiply_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return k.multiply(a, b)


def _multiply_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _multiply_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return multiply_op(grad.contiguous(), b), multiply_op(grad.contiguous(), a)  # both by NKI kernels


multiply_op.register_autograd(_multiply_backward, setup_context=_multiply_setup)


def _rmsnorm_reference(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def test_nki_op_is_a_torch_operator_with_a_derived_fake():
    torch.manual_seed(6)
    x, w = torch.randn(256, 512), torch.randn(512)
    out = torch.ops.nki_tests.rmsnorm(neuron(x), neuron(w))
    torch.testing.assert_close(out.cpu(), _rmsnorm_reference(x, w), rtol=1e-5, atol=1e-5)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = torch.ops.nki_tests.rmsnorm(torch.empty(384, 512, device="neuron"), torch.empty(512, device="neuron"))
    assert fake.shape == (384, 512) and fake.device.type == "neuron"


@pytest.mark.parametrize("backend", ["inductor", "neuron"])
def test_nki_op_is_one_node_under_torch_compile(backend):
    torch.manual_seed(7)
    x, w = neuron(torch.randn(256, 512)), neuron(torch.randn(512))

    def block(x, w):
        return torch.relu(torch.ops.nki_tests.rmsnorm(x, w)) + 1.0

    explained = torch._dynamo.explain(block)(x, w)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    torch._dynamo.reset()
    compiled = torch.compile(block, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, w).cpu(), block(x, w).cpu(), rtol=1e-6, atol=1e-6)


def test_training_through_an_nki_op_matches_torch_autograd():
    torch.manual_seed(8)
    x, target = torch.randn(128, 64), torch.randn(128, 64)
    start = torch.randn(128, 64)
    w_nki = neuron(start.clone()).requires_grad_()
    w_ref = start.clone().requires_grad_()
    opt_nki, opt_ref = torch.optim.SGD([w_nki], lr=0.05), torch.optim.SGD([w_ref], lr=0.05)
    for _ in range(3):
        loss_nki = (torch.ops.nki_tests.multiply(neuron(x), w_nki) - neuron(target)).pow(2).mean()
        loss_ref = (x * w_ref - target).pow(2).mean()
        opt_nki.zero_grad()
        opt_ref.zero_grad()
        loss_nki.backward()
        loss_ref.backward()
        torch.testing.assert_close(w_nki.grad.cpu(), w_ref.grad, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(loss_nki.cpu(), loss_ref.detach(), rtol=1e-5, atol=1e-7)
        opt_nki.step()
        opt_ref.step()
    assert loss_nki.item() < (start * x - target).pow(2).mean().item()


# ---- predicted Trainium time --------------------------------------------------------------------

from torch_neuronx.nki import cost_model  # noqa: E402
from torch_neuronx.nki.kernel import PROGRAMS  # noqa: E402


def _prediction_of(kernel_name):
    program = next(p for p in reversed(PROGRAMS) if p.encoded["kernel"] == kernel_name)
    return cost_model.predict(program.encoded, 3)


def test_repeated_bf16_matmul_runs_at_the_tensor_engine_peak():
    s = neuron(torch.randn(128, 128).to(torch.bfloat16))
    m = neuron(torch.randn(128, 512).to(torch.bfloat16))
    out = k.repeated_matmul(s, m, 200)
    torch.testing.assert_close(out.cpu(), 200 * (s.float().cpu().T @ m.float().cpu()), rtol=1e-4, atol=1e-2)
    p = _prediction_of("repeated_matmul")
    # By hand: 200 matmuls x 512 moving columns, one per cycle at 2.4 GHz = 42.67 us; 79 TFLOPS.
    assert p.bound_engine == "tensor" and p.instructions["tensor"] == 200
    assert p.busy_seconds["tensor"] == pytest.approx(200 * 512 / 2.4e9, rel=1e-9)
    assert p.flops / p.busy_seconds["tensor"] == pytest.approx(128 * 128 * 2 * 2.4e9, rel=1e-9)
    # Loads before and the copy-out after add at most ~25 us to the Tensor engine's time.
    assert p.busy_seconds["tensor"] <= p.seconds <= p.busy_seconds["tensor"] + 25e-6


def test_large_copy_is_bound_by_dma_bandwidth():
    x = neuron(torch.zeros(128 * 64, 2048))  # 64 MiB through SBUF and back
    k.copy_through_sbuf(x)
    p = _prediction_of("copy_through_sbuf")
    moved = 2 * x.numel() * 4
    assert p.bound_engine == "dma" and p.dma_bytes == moved
    by_hand = moved / (16 * 23e9) + 2 * 64 * 1300e-9 / 16  # 16 queues of 23 B/ns, 1.3 us per transfer
    assert p.seconds == pytest.approx(by_hand, rel=0.05)


def test_nki_report_lists_kernels():
    import torch_neuronx
    k.transpose_tile(neuron(torch.zeros(64, 32)))
    report = torch_neuronx.nki_report()
    row = next(line for line in report.splitlines() if line.startswith("transpose_tile | 64x32 float32"))
    assert "us |" in row and "NeuronCore-v3 (trn2)" in row


def test_average_pooling_with_a_five_dimensional_index_grid():
    x = torch.randn(16, 8, 12, generator=torch.Generator().manual_seed(9))
    out = k.average_pool_2x2(neuron(x))
    torch.testing.assert_close(out.cpu(), torch.nn.functional.avg_pool2d(x, 2), rtol=1e-6, atol=1e-6)


def test_attention_forward_matches_sdpa():
    g = torch.Generator().manual_seed(10)
    q, key, v = (torch.randn(128, 64, generator=g) for _ in range(3))
    out = k.attention_forward(neuron(q), neuron(key), neuron(v))
    expected = torch.nn.functional.scaled_dot_product_attention(q[None], key[None], v[None])[0]
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512"])
def test_kernels_under_each_simd_level(level):
    """The executor's loops on CPUs with less SIMD (TORCH_NEURONX_SIMD lowers the level this CPU uses): kernels
    of this file, the shipped kernels in a Llama and each instruction's tests against torch, in a fresh
    process; the element-wise, reduction and matmul loops each have a version per level."""
    import subprocess
    import sys

    env = dict(os.environ, TORCH_NEURONX_SIMD=level)
    here = os.path.dirname(os.path.abspath(__file__))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"{__file__}::test_rmsnorm_matches_transformers_formula", f"{__file__}::test_attention_forward_matches_sdpa",
               f"{__file__}::test_average_pooling_with_a_five_dimensional_index_grid",
               f"{__file__}::test_scan_along_the_free_axis", f"{__file__}::test_transpose_through_psum",
               f"{__file__}::test_tiled_matmul_current_api", f"{__file__}::test_spmd_grid_addition_on_neuron",
               os.path.join(here, "test_nki_hub.py"), os.path.join(here, "test_nki_instructions.py")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
