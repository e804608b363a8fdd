"""torch.compile's default backend (Inductor) on neuron tensors: results against eager neuron and
Inductor on the CPU device, the device's corrections of CPU-keyed lowerings, the report, the cache."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
from conftest import check_ok, run_python

# Compiling costs seconds on 2 cores: graphs stay tiny.


@pytest.fixture(autouse=True)
def _fresh_compiles():
    torch._dynamo.reset()
    torch_neuronx.reset_compile_report()
    yield
    torch._dynamo.reset()


def _rand(*shape, seed=0, **kw):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **kw)


def _both(fn, *cpu_args, **compile_kw):
    """(neuron compiled, CPU compiled, neuron eager) for the same inputs."""
    neuron_args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    got = torch.compile(fn, **compile_kw)(*neuron_args)
    ref = torch.compile(fn, **compile_kw)(*cpu_args)
    eager = fn(*neuron_args)
    return got, ref, eager


def _cpu(value):
    return tuple(v.cpu() for v in value) if isinstance(value, tuple) else value.cpu()


def test_pointwise_matmul_reduction_bit_equal_to_inductor_on_cpu():
    got, ref, eager = _both(lambda x, y: F.gelu(x @ y).sum(-1), _rand(64, 32), _rand(32, 48, seed=1))
    assert got.device.type == "neuron"
    assert torch.equal(got.cpu(), ref)
    torch.testing.assert_close(got.cpu(), eager.cpu())
    records = torch_neuronx.compile_records()
    assert [r.route for r in records] == ["inductor"] and records[0].signature[0] == "neuron:f32[64, 32]"


def test_graph_buffers_are_device_memory():
    x = _rand(256, 256).to("neuron")
    f = torch.compile(lambda t: (t.exp() + 1).softmax(-1))
    f(x)
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    out = f(x)
    assert out.device == x.device
    assert torch.neuron.memory_allocated() - before >= out.numel() * 4  # the result lives on the core


def test_module_forward_backward_and_sgd_match_cpu_inductor():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    neuron = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    neuron.load_state_dict(cpu.state_dict())
    neuron.to("neuron")
    compiled = {"cpu": torch.compile(cpu), "neuron": torch.compile(neuron)}
    x = _rand(20, 32, seed=3)
    for _ in range(3):
        losses = {}
        for device, model in compiled.items():
            losses[device] = model(x.to(device)).pow(2).mean()
            losses[device].backward()
        torch.testing.assert_close(losses["neuron"].cpu(), losses["cpu"], rtol=1e-6, atol=1e-7)
        for p, q in zip(cpu.parameters(), neuron.parameters()):
            assert q.grad.device.type == "neuron"
            torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-6, atol=1e-7)
        with torch.no_grad():
            for p in list(cpu.parameters()) + list(neuron.parameters()):
                p -= 0.1 * p.grad
                p.grad = None
    names = [r.name for r in torch_neuronx.compile_records()]
    assert any("forward" in n for n in names) and any("backward" in n for n in names), names


def test_fullgraph_and_graph_breaks():
    def broken(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y * 2

    x = _rand(8, 8)
    got, ref, _ = _both(broken, x)
    assert torch.equal(got.cpu(), ref)
    assert len(torch_neuronx.compile_records()) == 2  # a graph on each side of the break
    torch._dynamo.reset()
    with pytest.raises(Exception, match="graph_break"):
        torch.compile(broken, fullgraph=True)(x.to("neuron"))


def test_in_place_update_of_an_input_reaches_the_device_tensor():
    def update(cache, index, value):
        cache.index_copy_(0, index, value)
        return cache.sum()

    cache = torch.zeros(8, 4, device="neuron")
    total = torch.compile(update)(cache, torch.tensor([2, 5], device="neuron"), torch.ones(2, 4, device="neuron"))
    assert total.item() == 8.0
    assert cache.cpu()[2].tolist() == [1.0] * 4 and cache.cpu()[5].tolist() == [1.0] * 4
    assert cache.cpu().sum().item() == 8.0


def test_autocast_region_matches_cpu_inductor():
    def f(x, w):
        with torch.autocast("neuron" if x.device.type == "neuron" else "cpu", dtype=torch.bfloat16):
            return (x @ w).float().relu()

    got, ref, eager = _both(f, _rand(16, 32), _rand(32, 16, seed=1))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), eager.cpu(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-2, atol=1e-2)


def test_random_ops_are_seeded_and_shaped():
    f = torch.compile(lambda x: x + torch.rand_like(x) + F.dropout(torch.ones_like(x), 0.5))
    x = torch.zeros(64, 64, device="neuron")
    torch.manual_seed(7)
    a = f(x).cpu()
    torch.manual_seed(7)
    b = f(x).cpu()
    assert torch.equal(a, b)  # same seed, same draws
    uniform = a - torch.where(a >= 2.0, 2.0, 0.0)
    assert 0.0 <= uniform.min() and uniform.max() < 1.0
    assert 0.4 < (a >= 2.0).float().mean() < 0.6  # dropout keeps about half, scaled by 2


@pytest.mark.parametrize("op", [torch.argmax, torch.argmin])
def test_whole_tensor_argmax_of_a_transposed_input_is_the_logical_index(op):
    # Inductor's non-CPU lowering returns the index in memory order; the device's post-grad pass fixes it.
    x = _rand(16, 24, seed=5)
    for fn in (lambda t: op(t.t()), lambda t: op(t.t(), keepdim=True), lambda t: op(t.permute(1, 0)[::2])):
        got, ref, eager = _both(fn, x)
        assert torch.equal(got.cpu(), eager.cpu()) and torch.equal(got.cpu(), ref)
        torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_add_and_sub_of_a_python_scalar_round_as_on_cpu(dtype):
    # The CPU rounds the scalar to the tensor's dtype first, as eager does; the device's pass does too.
    b = _rand(1000, seed=2).to(dtype)
    got, ref, eager = _both(lambda t: (t + 0.1, t - 0.3, 0.7 - t), b)
    for g, r, e in zip(got, ref, eager):
        assert torch.equal(g.cpu(), r) and torch.equal(g.cpu(), e.cpu())


def test_each_new_shape_is_a_reported_recompile():
    f = torch.compile(lambda x: (x * 2).sin())
    for n in (4, 5, 6):
        f(torch.ones(n, device="neuron"))
    records = torch_neuronx.compile_records()
    assert len(records) == 2  # the default route follows torch's dynamic shapes: 5 generalises the size
    assert records[1].recompile_reason and "size mismatch" in records[1].recompile_reason
    text = torch_neuronx.compile_report()
    assert "inductor" in text and "recompiled because" in text


def test_reduce_overhead_mode_is_accepted():
    got, ref, _ = _both(lambda x: x.cos() * 3, _rand(32), mode="reduce-overhead")
    assert torch.equal(got.cpu(), ref)


def test_decode_shapes_take_the_device_kernels():
    # The same decode lowerings as backend="neuron": a linear of one row is the device's streaming
    # product (mm.out, called by the generated code), attention of one query the device's attention.
    w = _rand(256, 512, seed=1)
    x = _rand(1, 512, seed=2)
    from torch._inductor.utils import run_and_get_code

    got, code = run_and_get_code(torch.compile(lambda a, b: F.linear(a, b)), x.to("neuron"), w.to("neuron"))
    assert "extern_kernels.mm" in code[0]
    # Bit-equal to eager neuron, whose mm runs the device's decode kernel; close to the CPU's GEMM.
    assert torch.equal(got.cpu(), F.linear(x.to("neuron"), w.to("neuron")).cpu())
    torch.testing.assert_close(got.cpu(), F.linear(x, w), rtol=1e-4, atol=1e-4)
    q, k, v = _rand(1, 4, 1, 32, seed=3), _rand(1, 4, 9, 32, seed=4), _rand(1, 4, 9, 32, seed=5)
    got, code = run_and_get_code(torch.compile(F.scaled_dot_product_attention), q.to("neuron"), k.to("neuron"),
                                 v.to("neuron"))
    assert "_scaled_dot_product_flash_attention_for_cpu" in code[0]
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v), rtol=1e-5, atol=1e-6)


def test_second_process_loads_from_the_neff_cache(tmp_path):
    code = """
        import torch, torch_neuronx
        from torch._dynamo.utils import counters
        f = torch.compile(lambda x, y: (x @ y).relu().sum(-1))
        x = torch.ones(16, 16, device="neuron")
        print(f(x, x).cpu()[0].item())
        print(torch_neuronx.compile_records()[0].source.replace(" ", "_"), counters["inductor"]["fxgraph_cache_miss"])
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "shared")}
    cold = check_ok(run_python(code, env)).split()
    warm = check_ok(run_python(code, env)).split()
    assert cold == ["256.0", "compiled", "1"]
    assert warm == ["256.0", "disk_cache", "0"]
    assert (tmp_path / "shared" / "inductor").is_dir()


def test_each_vector_isa_keeps_its_own_inductor_cache(tmp_path):
    # Inductor's FX graph cache does not key on the vector ISA its kernels are built for: a graph built for
    # AVX-512, then found by a process building for AVX2 (ATEN_CPU_CAPABILITY, or a cache shared by two
    # kinds of machine), returned NaN. Processes alternating between two ISAs over one cache stay right.
    weaker = {"AVX512": "avx2", "AVX2": "default"}.get(torch.backends.cpu.get_cpu_capability())
    if weaker is None:
        pytest.skip(f"needs AVX2 or AVX-512 to have a weaker ISA to force; this CPU runs "
                    f"{torch.backends.cpu.get_cpu_capability()}")
    code = """
        import torch
        x = torch.randn(16, 40)
        got = torch.compile(lambda a: a.softmax(-1))(x.to("neuron"))
        print((got.cpu() - x.softmax(-1)).abs().max().item() < 1e-6)
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    for capability in ({}, {"ATEN_CPU_CAPABILITY": weaker}, {}):
        assert check_ok(run_python(code, {**env, **capability})).split()[-1] == "True", capability
    assert len(list((tmp_path / "inductor").iterdir())) == 2


def test_a_users_inductor_settings_win(tmp_path):
    out = check_ok(run_python("""
        import torch
        torch.compile(lambda x: x + 1)(torch.ones(2, device="neuron"))
        from torch._inductor import config
        import os
        print(config.loop_reindexing_after_fusion, os.environ["TORCHINDUCTOR_CACHE_DIR"])
    """, {"TORCHINDUCTOR_LOOP_REINDEXING_AFTER_FUSION": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "mine")}))
    assert out.splitlines()[-1] == f"True {tmp_path / 'mine'}"
    out = check_ok(run_python("""
        import torch
        torch.compile(lambda x: x + 1)(torch.ones(2, device="neuron"))
        from torch._inductor import config
        print(config.loop_reindexing_after_fusion)
    """))
    assert out.splitlines()[-1] == "False"


def test_a_graph_on_another_core_allocates_and_trains_there():
    torch.manual_seed(0)
    cpu = nn.Linear(8, 8)
    model = nn.Linear(8, 8).to("neuron:1")
    model.load_state_dict(cpu.state_dict())
    x = _rand(3, 8, seed=6)
    assert torch.neuron.current_device() == 0
    out = torch.compile(model)(x.to("neuron:1"))
    assert out.device == torch.device("neuron:1")
    out.exp().sum().backward()
    cpu(x).exp().sum().backward()
    assert model.weight.grad.device == torch.device("neuron:1")
    torch.testing.assert_close(model.weight.grad.cpu(), cpu.weight.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.cpu(), cpu(x).detach(), rtol=1e-5, atol=1e-6)


def test_kernels_are_vectorised_whichever_route_compiles_first():
    # Inductor probes the vector ISA once per process; the device registration makes that probe succeed
    # (vector_isa.py) unless the user chose, so neither route leaves the other with scalar code.
    code = """
        import torch
        x = torch.randn(16, 40)
        got = torch.compile(lambda a: a.softmax(-1))(x.to("neuron"))
        from torch._inductor import cpu_vec_isa
        print(bool(cpu_vec_isa.pick_vec_isa()), torch.allclose(got.cpu(), x.softmax(-1)))
        cpu = torch.compile(lambda a: a.exp().sum(-1))(x)
        print(torch.allclose(cpu, x.exp().sum(-1)))
    """
    assert check_ok(run_python(code)).splitlines()[-2:] == ["True True", "True"]
    assert check_ok(run_python(code, {"TORCHINDUCTOR_VEC_ISA_OK": "0"})).splitlines()[-2:] == ["False True", "True"]
