"""torch.compile(backend="neuron"): results against eager, static shapes, the disk cache, the report."""
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
from conftest import check_ok, run_python

# Every test here compiles, and compiling costs seconds on 2 cores: graphs stay tiny.


@pytest.fixture(autouse=True)
def _fresh_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    torch_neuronx.reset_compile_report()
    yield
    torch._dynamo.reset()


def _rand(*shape, seed=0, **kw):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, **kw)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def _block(seed=0):
    torch.manual_seed(seed)
    return _Block()


def test_forward_matches_eager_and_stays_on_device():
    def f(x, y):
        return F.gelu(x @ y).softmax(-1) + torch.arange(8, device=x.device)

    x, y = _rand(8, 8, seed=1), _rand(8, 8, seed=2)
    out = torch.compile(f, backend="neuron")(x.to("neuron"), y.to("neuron"))
    assert out.device == torch.device("neuron", 0)
    torch.testing.assert_close(out.cpu(), f(x, y))


def test_results_are_device_memory():
    torch.neuron.empty_cache()
    before = torch.neuron.memory_allocated()
    x = torch.ones(1 << 20, device="neuron")
    out = torch.compile(lambda x: x * 2 + 1, backend="neuron")(x)
    # The input (4 MiB) and the result (4 MiB) are both charged to the core.
    assert torch.neuron.memory_allocated() - before >= 2 * 4 * 2**20
    del x
    assert torch.neuron.memory_allocated() - before >= 4 * 2**20
    assert out.cpu().eq(3).all()
    del out
    assert torch.neuron.memory_allocated() == before


def test_module_forward_backward_matches_eager():
    compiled_model, eager_model = _block().to("neuron"), _block().to("neuron")
    x = _rand(4, 16, seed=3).to("neuron")
    compiled = torch.compile(compiled_model, backend="neuron")
    compiled(x).square().sum().backward()
    eager_model(x).square().sum().backward()
    for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters()):
        assert p.grad is not None and p.grad.device.type == "neuron", name
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), msg=name)


def test_input_gradient_crosses_back_to_neuron():
    x = _rand(6, 5, seed=4).to("neuron").requires_grad_()
    torch.compile(lambda t: (t.sin() * t).sum(), backend="neuron")(x).backward()
    ref = _rand(6, 5, seed=4).requires_grad_()
    (ref.sin() * ref).sum().backward()
    assert x.grad.device.type == "neuron"
    torch.testing.assert_close(x.grad.cpu(), ref.grad)


def test_fullgraph_and_graph_breaks():
    def with_break(x):
        y = x.cos() + 1
        torch._dynamo.graph_break()
        return y * x.sin()

    x = _rand(5, 7, seed=5).to("neuron")
    torch.testing.assert_close(torch.compile(with_break, backend="neuron")(x).cpu(), with_break(x.cpu()))
    assert len(torch_neuronx.compile_records()) == 2  # one graph on each side of the break

    torch.testing.assert_close(torch.compile(torch.tanh, backend="neuron", fullgraph=True)(x).cpu(), x.cpu().tanh())
    torch._dynamo.reset()
    with pytest.raises(Exception, match="graph_break"):
        torch.compile(with_break, backend="neuron", fullgraph=True)(x)


def test_in_place_update_of_an_input_reaches_the_device_tensor():
    cache = torch.zeros(2, 4, 8, device="neuron")

    def write(cache, pos, value):
        cache.index_copy_(1, pos, value)
        return cache.sum()

    value = _rand(2, 1, 8, seed=6).to("neuron")
    total = torch.compile(write, backend="neuron")(cache, torch.tensor([2], device="neuron"), value)
    assert torch.equal(cache[:, 2:3].cpu(), value.cpu())
    assert cache[:, [0, 1, 3]].abs().sum().item() == 0
    torch.testing.assert_close(total.cpu(), value.cpu().sum())


def test_dynamic_true_is_refused_clearly():
    with pytest.raises(Exception, match="static shapes only") as info:
        torch.compile(lambda x: x + 1, backend="neuron", dynamic=True)(torch.ones(3, device="neuron"))
    assert "dynamic=True" in str(info.value)


def test_each_new_shape_is_a_counted_and_explained_recompile():
    f = torch.compile(lambda x: x.relu() * 2, backend="neuron")
    for n in (4, 4, 6, 9, 6):
        x = _rand(n, 3, seed=n).to("neuron")
        torch.testing.assert_close(f(x).cpu(), x.cpu().relu() * 2)
    records = torch_neuronx.compile_records()
    tensors = [[s for s in r.signature if s.startswith("neuron:")] for r in records]
    assert tensors == [["neuron:f32[4, 3]"], ["neuron:f32[6, 3]"], ["neuron:f32[9, 3]"]]
    assert records[0].recompile_reason is None
    assert records[1].recompile_reason  # Dynamo's guard failure: the size changed
    assert "neuron:f32[6, 3] -> neuron:f32[9, 3]" in records[2].recompile_reason
    report = torch_neuronx.compile_report()
    assert "3 graphs, 2 recompiles" in report and "recompiled because" in report


@torch.library.custom_op("neuron_test::scale", mutates_args=(), device_types="neuron")
def _device_only_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@_device_only_scale.register_fake
def _(x):
    return torch.empty_like(x)


def test_compile_failure_names_the_graph_and_can_fall_back(monkeypatch):
    # An operator with a neuron kernel and no CPU one cannot be lowered on the host.
    def scaled(x):
        return torch.ops.neuron_test.scale(x) + 1

    x = torch.ones(3, device="neuron")
    with pytest.raises(torch_neuronx.NeuronCompileError,
                       match="could not compile graph 'scaled'.*neuron_test.scale.*no CPU kernel.*FALLBACK"):
        torch.compile(scaled, backend="neuron")(x)
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_NEURONX_COMPILE_FALLBACK", "eager")
    with pytest.warns(UserWarning, match="runs eagerly"):
        out = torch.compile(scaled, backend="neuron")(x)
    assert out.device.type == "neuron" and out.cpu().eq(4).all()
    assert torch_neuronx.compile_records()[-1].source == "eager fallback"


def test_unknown_option_is_refused():
    with pytest.raises(Exception, match="unknown neuron backend options"):
        torch.compile(torch.sin, backend="neuron", options={"no_such_option": 1})(torch.ones(2, device="neuron"))


def test_second_process_loads_from_the_disk_cache(tmp_path):
    code = """
        import time, torch, torch_neuronx
        from torch._dynamo.utils import counters
        f = torch.compile(lambda x, y: (x @ y).relu().sum(-1), backend="neuron")
        x = torch.ones(16, 16, device="neuron")
        print(f(x, x).cpu()[0].item())
        r = torch_neuronx.compile_records()[0]
        print(r.source, r.cache_hits, counters["inductor"]["fxgraph_cache_miss"])
    """
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "shared")}
    cold = check_ok(run_python(code, env)).split()
    warm = check_ok(run_python(code, env)).split()
    assert cold[0] == warm[0] == "256.0"
    assert cold[1:] == ["compiled", "0", "1"]
    assert warm[1:] == ["disk", "cache", "1", "0"]  # nothing compiled in the second process
    assert os.listdir(tmp_path / "shared" / "graphs")


def test_autocast_region_in_graph():
    def f(x, w):
        with torch.autocast("neuron", dtype=torch.bfloat16):
            return x @ w

    x, w = _rand(4, 8, seed=7).to("neuron"), _rand(8, 3, seed=8).to("neuron")
    out = torch.compile(f, backend="neuron")(x, w)
    assert out.dtype == torch.bfloat16 and out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), f(x, w).cpu(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_row_matmul_takes_the_matrix_vector_route_with_cpu_results(dtype):
    x, w = _rand(1, 96, seed=9).to(dtype), _rand(40, 96, seed=10).to(dtype)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close((x.to("neuron") @ w.to("neuron").t()).cpu(), x @ w.t(), **tol)
    odd_x, odd_w = _rand(1, 77, seed=22).to(dtype), _rand(300, 77, seed=23).to(dtype)  # vector tails, many rows
    torch.testing.assert_close((odd_x.to("neuron") @ odd_w.to("neuron").t()).cpu(), odd_x @ odd_w.t(), **tol)
    for shape in ((96,), (1, 1, 96), (3, 96)):  # one row (any rank), and the general path
        inp = _rand(*shape, seed=11).to(dtype)
        torch.testing.assert_close(torch.ops.neuron.linear(inp, w, None), F.linear(inp, w), **tol)
    bias = _rand(40, seed=12).to(dtype)
    torch.testing.assert_close(torch.ops.neuron.linear(x, w, bias), F.linear(x, w, bias), **tol)


@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask", "gqa", "fully_masked_row"])
def test_short_query_attention_lowering_matches_sdpa(case):
    from torch_neuronx.compile.attention import scaled_dot_product_attention as lowered

    q, k, v = _rand(2, 4, 3, 8, seed=13), _rand(2, 4, 7, 8, seed=14), _rand(2, 4, 7, 8, seed=15)
    kw = {}
    if case == "causal":
        kw["is_causal"] = True
    elif case == "bool_mask":
        kw["attn_mask"] = _rand(3, 7, seed=16) > 0
        kw["attn_mask"][:, 0] = True
    elif case == "float_mask":
        kw["attn_mask"] = _rand(2, 1, 3, 7, seed=17)
    elif case == "gqa":
        k, v, kw["enable_gqa"] = k[:, :2], v[:, :2], True
    else:
        kw["attn_mask"] = torch.ones(3, 7, dtype=torch.bool)
        kw["attn_mask"][1] = False
    expected = F.scaled_dot_product_attention(q, k, v, **kw)
    if case == "fully_masked_row":
        expected = torch.where(expected.isnan(), 0.0, expected)
    torch.testing.assert_close(lowered(q, k, v, **kw), expected)


def test_hf_static_cache_generation_compiled_matches_eager():
    from transformers import CompileConfig

    from hf_helpers import tiny_llama

    model = tiny_llama().to("neuron")
    ids = torch.tensor([[1, 5, 7, 9, 11]], device="neuron")
    kw = dict(max_new_tokens=6, do_sample=False, cache_implementation="static")
    eager = model.generate(ids, disable_compile=True, **kw)
    compiled = model.generate(ids, compile_config=CompileConfig(backend="neuron"), **kw)
    assert torch.equal(compiled.cpu(), eager.cpu())
    assert torch_neuronx.compile_records(), "generate() did not compile the decode step"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_lowering_matches_f_cross_entropy(reduction):
    from torch_neuronx.compile.loss import cross_entropy

    logits = _rand(6, 11, seed=18)
    target = torch.tensor([1, 4, -100, 10, 0, 4])
    got_in, ref_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    got = cross_entropy(got_in, target, reduction=reduction)
    ref = F.cross_entropy(ref_in, target, reduction=reduction)
    torch.testing.assert_close(got, ref)
    (got * torch.arange(1.0, got.numel() + 1).reshape(got.shape)).sum().backward()
    (ref * torch.arange(1.0, ref.numel() + 1).reshape(ref.shape)).sum().backward()
    torch.testing.assert_close(got_in.grad, ref_in.grad)
    smoothed = cross_entropy(logits, target, label_smoothing=0.1)  # outside the common case: F's own
    torch.testing.assert_close(smoothed, F.cross_entropy(logits, target, label_smoothing=0.1))


def test_inputs_saved_for_backward_outlive_the_callers_references():
    f = torch.compile(lambda a, w: (a * w).sum(), backend="neuron")
    w = _rand(256, seed=19).to("neuron").requires_grad_()
    loss = f(_rand(256, seed=20).to("neuron"), w)  # the only reference to `a` is the graph's
    scratch = [torch.full((256,), 7.0, device="neuron") for _ in range(8)]  # reuses any freed block
    loss.backward()
    torch.testing.assert_close(w.grad.cpu(), _rand(256, seed=20))
    del scratch


def test_compiled_kernels_are_vectorised():
    # The provisioned environment has Sleef (libsleef-dev): Inductor must not fall back to scalar code.
    from torch._inductor import config, cpu_vec_isa

    from torch_neuronx.compile import vector_isa

    patches = vector_isa.inductor_patches()
    assert patches == {"cpp.vec_isa_ok": True}
    with config.patch(patches):
        assert cpu_vec_isa.pick_vec_isa(), "no usable vector ISA"
    x = _rand(64, 300, seed=21).to("neuron")
    torch.testing.assert_close(torch.compile(lambda t: t.softmax(-1).exp(), backend="neuron")(x).cpu(),
                               x.cpu().softmax(-1).exp())
