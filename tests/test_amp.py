"""torch.autocast("neuron"): the CUDA-style op policy."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).to("neuron")


def test_autocast_available():
    assert torch.amp.is_autocast_available("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    assert not torch.is_autocast_enabled("neuron")


def test_lower_precision_ops_bf16():
    a, b = _rand(8, 16, seed=1), _rand(16, 4, seed=2)
    w, bias = _rand(4, 16, seed=3), _rand(4, seed=4)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        mm = a @ b
        lin = F.linear(a, w, bias)
        bm = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))
        plain = a + 1  # not in any list: stays fp32
    assert mm.dtype == lin.dtype == bm.dtype == torch.bfloat16
    assert plain.dtype == torch.float32
    torch.testing.assert_close(mm.float().cpu(), a.cpu() @ b.cpu(), rtol=2e-2, atol=5e-2)
    ref = F.linear(a.cpu().bfloat16(), w.cpu().bfloat16(), bias.cpu().bfloat16())
    torch.testing.assert_close(lin.cpu(), ref, rtol=1e-2, atol=1e-2)


def test_fp32_ops():
    x = _rand(4, 10, dtype=torch.bfloat16, seed=5)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        sm = torch.softmax(x, dim=-1)
        lsm = F.log_softmax(x, dim=-1)
        ln = F.layer_norm(x, (10,))
        ex = torch.exp(x)
        s = torch.sum(x)
        ce = F.cross_entropy(x, torch.tensor([0, 1, 2, 3], device="neuron"))
    for name, t in dict(softmax=sm, log_softmax=lsm, layer_norm=ln, exp=ex, sum=s, cross_entropy=ce).items():
        assert t.dtype == torch.float32, name
    torch.testing.assert_close(sm.cpu(), torch.softmax(x.cpu().float(), dim=-1))


def test_promote_ops():
    lo = _rand(6, dtype=torch.bfloat16, seed=6)
    hi = _rand(6, seed=7)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = torch.addcmul(hi, lo, hi, value=0.5)
        cat = torch.cat([lo, hi])
        st = torch.stack([lo, hi])
    assert out.dtype == cat.dtype == st.dtype == torch.float32
    ref = torch.addcmul(hi.cpu(), lo.cpu().float(), hi.cpu(), value=0.5)
    torch.testing.assert_close(out.cpu(), ref)


def test_sdpa_mixed_inputs():
    q = _rand(2, 4, 6, 8, dtype=torch.bfloat16, seed=8)
    k = _rand(2, 4, 6, 8, seed=9)
    v = _rand(2, 4, 6, 8, dtype=torch.float16, seed=10)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 4, 6, 8)
    ref = F.scaled_dot_product_attention(q.cpu().float(), k.cpu().float(), v.cpu().float(), is_causal=True)
    torch.testing.assert_close(out.cpu().float(), ref, rtol=5e-2, atol=5e-2)


def test_transformer_training_step_under_autocast():
    torch.manual_seed(0)
    cpu = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    model = copy.deepcopy(cpu).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 5, 32)
    target = torch.randn(2, 5, 32)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = model(x.to("neuron"))
        loss = F.mse_loss(out.float(), target.to("neuron"))
    assert out.dtype == torch.float32  # the layer ends with layer_norm, an fp32 op
    loss.backward()
    ref_loss = F.mse_loss(cpu(x), target)
    torch.testing.assert_close(loss.detach().cpu(), ref_loss.detach(), rtol=5e-2, atol=5e-2)
    ref_loss.backward()
    for (name, p), (_, pc) in zip(model.named_parameters(), cpu.named_parameters()):
        assert p.grad is not None and p.grad.dtype == torch.float32, name
        assert torch.isfinite(p.grad).all(), name
        # bf16 compute: loose, but the same gradient
        torch.testing.assert_close(p.grad.cpu(), pc.grad, rtol=0.1, atol=0.05, msg=name)
    before = model.linear1.weight.detach().clone()
    opt.step()
    assert not torch.equal(before, model.linear1.weight.detach())


def test_fp16_autocast():
    a, b = _rand(8, 16, seed=11), _rand(16, 4, seed=12)
    with torch.autocast("neuron", dtype=torch.float16):
        mm = a @ b
        sm = torch.softmax(mm, dim=-1)
    assert mm.dtype == torch.float16
    assert sm.dtype == torch.float32
    torch.testing.assert_close(mm.float().cpu(), a.cpu() @ b.cpu(), rtol=1e-2, atol=1e-2)
    scaler = torch.amp.GradScaler("neuron")
    lin = nn.Linear(16, 4).to("neuron")
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    with torch.autocast("neuron", dtype=torch.float16):
        loss = lin(a).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert lin.weight.grad.dtype == torch.float32 and torch.isfinite(lin.weight.grad).all()


def test_autocast_disabled_region():
    a, b = _rand(4, 4, seed=13), _rand(4, 4, seed=14)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        with torch.autocast("neuron", enabled=False):
            full = a @ b
        low = a @ b
    assert full.dtype == torch.float32 and low.dtype == torch.bfloat16
