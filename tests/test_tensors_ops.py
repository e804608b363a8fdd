"""Tensor creation, ops against the CPU, out=/in-place variants, copies. The device's own decode kernels
(few-row products, decode attention) are tested in test_decode_kernels.py."""
import random
import threading
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import close, requires_two_devices

N = torch.device("neuron:0")


def exact(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# --- dtypes --------------------------------------------------------------------------------------

ALL_DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2,
              torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]


def _sample(dtype, n=37):
    g = torch.Generator().manual_seed(1234)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(n, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 4).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def _bits(t):
    """Bitwise view for exact comparison (fp8 has no equality kernels everywhere)."""
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8)
    return t


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_roundtrip_every_dtype(dtype):
    cpu = _sample(dtype)
    n = cpu.to("neuron")
    assert n.device == N and n.dtype == dtype and n.shape == cpu.shape
    exact(_bits(n.cpu()), _bits(cpu))
    # creation directly on the device
    z = torch.zeros(5, dtype=dtype, device="neuron")
    exact(_bits(z.cpu()), _bits(torch.zeros(5, dtype=dtype)))
    o = torch.ones(2, 3, dtype=dtype, device="neuron")
    exact(_bits(o.cpu()), _bits(torch.ones(2, 3, dtype=dtype)))
    e = torch.empty(7, dtype=dtype, device="neuron")
    assert e.dtype == dtype and e.device == N and e.numel() == 7


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float16, torch.bfloat16], ids=str)
def test_factories(dtype):
    exact(torch.arange(10, dtype=dtype, device="neuron").cpu(), torch.arange(10, dtype=dtype))
    exact(torch.full((3, 4), 7, dtype=dtype, device="neuron").cpu(), torch.full((3, 4), 7, dtype=dtype))
    exact(torch.eye(4, dtype=dtype, device="neuron").cpu(), torch.eye(4, dtype=dtype))
    exact(torch.tensor([[1, 2], [3, 4]], dtype=dtype, device="neuron").cpu(), torch.tensor([[1, 2], [3, 4]], dtype=dtype))
    if dtype.is_floating_point:
        exact(torch.linspace(0, 1, 9, dtype=dtype, device="neuron").cpu(), torch.linspace(0, 1, 9, dtype=dtype))


# --- ops vs CPU ----------------------------------------------------------------------------------

def _pair(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = torch.randn(*shape, generator=g, dtype=dtype)
    return cpu, cpu.to("neuron")


def test_elementwise():
    a, na = _pair(4, 5, seed=1)
    b, nb = _pair(4, 5, seed=2)
    close(na + nb, a + b)
    close(na - 2.5 * nb, a - 2.5 * b)
    close(na * nb, a * b)
    close(na / (nb.abs() + 1), a / (b.abs() + 1))
    close(torch.exp(na), torch.exp(a))
    close(torch.log(na.abs() + 1e-3), torch.log(a.abs() + 1e-3))
    close(torch.sqrt(na.abs()), torch.sqrt(a.abs()))
    close(torch.sin(na), torch.sin(a))
    close(torch.tanh(na), torch.tanh(a))
    close(torch.sigmoid(na), torch.sigmoid(a))
    close(F.gelu(na), F.gelu(a))
    close(F.silu(na), F.silu(a))
    close(F.relu(na), F.relu(a))
    close(torch.pow(na, 2), torch.pow(a, 2))
    close(torch.clamp(na, -0.5, 0.5), torch.clamp(a, -0.5, 0.5))
    close(torch.maximum(na, nb), torch.maximum(a, b))
    close(na > nb, a > b)
    close(na + 1, a + 1)
    # broadcasting
    c, nc = _pair(5, seed=3)
    close(na * nc, a * c)
    # a 0-dim CPU tensor is allowed as a scalar operand
    close(na * torch.tensor(3.0), a * 3.0)
    # integer arithmetic
    i = torch.arange(-6, 6, dtype=torch.int32)
    ni = i.to("neuron")
    close(ni * 3 - 1, i * 3 - 1)
    close(torch.div(ni, 4, rounding_mode="floor"), torch.div(i, 4, rounding_mode="floor"))
    close(ni % 5, i % 5)
    close(ni & 3, i & 3)


def test_reductions():
    a, na = _pair(6, 7, seed=4)
    close(na.sum(), a.sum())
    close(na.sum(dim=1), a.sum(dim=1))
    close(na.mean(dim=0, keepdim=True), a.mean(dim=0, keepdim=True))
    close(na.amax(dim=1), a.amax(dim=1))
    close(na.min(), a.min())
    vals, idx = na.max(dim=1)
    evals, eidx = a.max(dim=1)
    close(vals, evals)
    close(idx, eidx)
    close(na.argmin(dim=0), a.argmin(dim=0))
    close(na.std(dim=1), a.std(dim=1))
    close(na.var(), a.var())
    close(na.prod(dim=0), a.prod(dim=0))
    close(na.norm(), a.norm())
    close(torch.cumsum(na, dim=1), torch.cumsum(a, dim=1))
    close(torch.logsumexp(na, dim=1), torch.logsumexp(a, dim=1))
    close((na > 0).sum(), (a > 0).sum())
    close((na > 0).any(), (a > 0).any())
    close((na > -100).all(), (a > -100).all())
    s, si = torch.sort(na, dim=1)
    es, esi = torch.sort(a, dim=1)
    close(s, es)
    close(si, esi)
    tv, ti = torch.topk(na, 3, dim=1)
    etv, eti = torch.topk(a, 3, dim=1)
    close(tv, etv)
    close(ti, eti)


def test_matmul_family():
    a, na = _pair(8, 16, seed=5)
    b, nb = _pair(16, 4, seed=6)
    close(na @ nb, a @ b)
    close(torch.mm(na, nb), torch.mm(a, b))
    x, nx = _pair(3, 8, 16, seed=7)
    y, ny = _pair(3, 16, 5, seed=8)
    close(torch.bmm(nx, ny), torch.bmm(x, y))
    close(torch.matmul(nx, nb), torch.matmul(x, b))
    v, nv = _pair(16, seed=9)
    close(na @ nv, a @ v)
    bias, nbias = _pair(4, seed=10)
    close(torch.addmm(nbias, na, nb), torch.addmm(bias, a, b))
    w, nw = _pair(4, 16, seed=11)
    close(F.linear(na, nw, nbias), F.linear(a, w, bias))
    close(torch.einsum("ij,jk->ik", na, nb), torch.einsum("ij,jk->ik", a, b))
    h, nh = _pair(8, 16, dtype=torch.bfloat16, seed=12)
    k, nk = _pair(16, 4, dtype=torch.bfloat16, seed=13)
    close(nh @ nk, h @ k)


def test_indexing():
    a, na = _pair(6, 5, seed=14)
    idx = torch.tensor([4, 0, 2])
    nidx = idx.to("neuron")
    close(na[nidx], a[idx])
    close(na[idx], a[idx])  # CPU index tensors are accepted, as on CUDA
    close(na[:, nidx], a[:, idx])
    close(na[na > 0], a[a > 0])
    close(na[1:5:2, ::2], a[1:5:2, ::2])
    close(na[-1], a[-1])
    close(torch.index_select(na, 1, nidx), torch.index_select(a, 1, idx))
    gidx = torch.tensor([[0, 1], [2, 3], [4, 0], [1, 1], [3, 2], [0, 4]])
    close(torch.gather(na, 1, gidx.to("neuron")), torch.gather(a, 1, gidx))
    src, nsrc = _pair(6, 2, seed=15)
    close(torch.zeros(6, 5, device="neuron").scatter_(1, gidx.to("neuron"), nsrc),
          torch.zeros(6, 5).scatter_(1, gidx, src))
    close(torch.zeros(6, 5, device="neuron").scatter_add(1, gidx.to("neuron"), nsrc),
          torch.zeros(6, 5).scatter_add(1, gidx, src))
    # index assignment
    b, nb = a.clone(), na.clone()
    b[idx] = 0.5
    nb[nidx] = 0.5
    close(nb, b)
    b[a < 0] = -1.0
    nb[na < 0] = -1.0
    close(nb, b)
    vals, nvals = _pair(3, 5, seed=16)
    b.index_put_((idx,), vals, accumulate=True)
    nb.index_put_((nidx,), nvals, accumulate=True)
    close(nb, b)
    close(torch.nonzero(na > 0.5), torch.nonzero(a > 0.5))
    close(torch.masked_fill(na, na > 0, 9.0), torch.masked_fill(a, a > 0, 9.0))


def test_cat_stack_where_split():
    a, na = _pair(2, 3, seed=17)
    b, nb = _pair(4, 3, seed=18)
    close(torch.cat([na, nb]), torch.cat([a, b]))
    close(torch.cat([na, na], dim=1), torch.cat([a, a], dim=1))
    close(torch.stack([na, na * 2]), torch.stack([a, a * 2]))
    close(torch.where(na > 0, na, -na), torch.where(a > 0, a, -a))
    close(torch.where(na > 0, na, 0.0), torch.where(a > 0, a, 0.0))
    for p, q in zip(torch.split(nb, [1, 3]), torch.split(b, [1, 3])):
        close(p, q)
    for p, q in zip(torch.chunk(nb, 2, dim=0), torch.chunk(b, 2, dim=0)):
        close(p, q)
    close(torch.flip(nb, [0]), torch.flip(b, [0]))
    close(torch.roll(nb, 1, 1), torch.roll(b, 1, 1))
    close(torch.tril(nb), torch.tril(b))
    close(nb.repeat(2, 1), b.repeat(2, 1))
    close(torch.tile(na, (2,)), torch.tile(a, (2,)))
    close(F.pad(na, (1, 2)), F.pad(a, (1, 2)))


def test_nn_functional():
    x, nx = _pair(4, 10, seed=19)
    close(torch.softmax(nx, dim=-1), torch.softmax(x, dim=-1))
    close(F.log_softmax(nx, dim=0), F.log_softmax(x, dim=0))
    w, nw = _pair(10, seed=20)
    b, nb = _pair(10, seed=21)
    close(F.layer_norm(nx, (10,), nw, nb), F.layer_norm(x, (10,), w, b))
    close(F.rms_norm(nx, (10,), nw), F.rms_norm(x, (10,), w))
    emb, nemb = _pair(12, 6, seed=22)
    ids = torch.tensor([[0, 5, 11], [3, 3, 7]])
    close(F.embedding(ids.to("neuron"), nemb), F.embedding(ids, emb))
    target = torch.tensor([1, 0, 9, 4])
    close(F.cross_entropy(nx, target.to("neuron")), F.cross_entropy(x, target))
    close(F.mse_loss(nx, nx * 0.5), F.mse_loss(x, x * 0.5))
    img, nimg = _pair(2, 3, 8, 8, seed=23)
    close(F.max_pool2d(nimg, 2), F.max_pool2d(img, 2))
    close(F.avg_pool2d(nimg, 2), F.avg_pool2d(img, 2))
    q, nq = _pair(2, 2, 5, 8, seed=25)
    close(F.scaled_dot_product_attention(nq, nq, nq, is_causal=True),
          F.scaled_dot_product_attention(q, q, q, is_causal=True), rtol=1e-5, atol=1e-5)
    bn = torch.nn.BatchNorm1d(10)
    nbn = torch.nn.BatchNorm1d(10).to("neuron")
    close(nbn(nx), bn(x))
    close(nbn.running_mean, bn.running_mean)


def test_loss_functions_match_cpu_without_warnings():
    x, nx = _pair(4, 10, seed=32)
    y, ny = _pair(4, 10, seed=33)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CPU emits none; neither may the device
        for reduction in ("mean", "sum", "none"):
            close(F.mse_loss(nx, ny, reduction=reduction), F.mse_loss(x, y, reduction=reduction))
            close(F.l1_loss(nx, ny, reduction=reduction), F.l1_loss(x, y, reduction=reduction))
            close(F.smooth_l1_loss(nx, ny, reduction=reduction), F.smooth_l1_loss(x, y, reduction=reduction))


def test_convolution():
    img, nimg = _pair(2, 3, 8, 8, seed=23)
    k, nk = _pair(4, 3, 3, 3, seed=24)
    b, nb = _pair(4, seed=34)
    close(F.conv2d(nimg, nk, nb, padding=1), F.conv2d(img, k, b, padding=1), rtol=1e-4, atol=1e-4)
    s, ns = _pair(2, 3, 16, seed=35)
    k1, nk1 = _pair(5, 3, 4, seed=36)
    close(F.conv1d(ns, nk1, stride=2), F.conv1d(s, k1, stride=2), rtol=1e-4, atol=1e-4)


def test_non_contiguous_inputs():
    a, na = _pair(6, 8, seed=26)
    at, nat = a.t(), na.t()
    assert not nat.is_contiguous()
    close(nat + 1, at + 1)
    close(nat @ na, at @ a)
    close(nat.sum(dim=0), at.sum(dim=0))
    close(nat.contiguous(), at.contiguous())
    assert nat.contiguous().is_contiguous()
    sl, nsl = a[:, ::3], na[:, ::3]
    close(torch.exp(nsl), torch.exp(sl))
    torch.testing.assert_close(nsl.cpu(), sl, rtol=0, atol=0)
    ex, nex = a[:1].expand(4, 8), na[:1].expand(4, 8)
    close(nex * 2, ex * 2)
    close(torch.softmax(nat, dim=1), torch.softmax(at, dim=1))
    cl = torch.randn(2, 3, 4, 4)
    ncl = cl.to("neuron").to(memory_format=torch.channels_last)
    assert ncl.is_contiguous(memory_format=torch.channels_last)
    close(ncl, cl)
    close(ncl * 2, cl * 2)


def test_out_variants():
    a, na = _pair(3, 4, seed=27)
    b, nb = _pair(3, 4, seed=28)
    out = torch.empty(3, 4, device="neuron")
    ptr = out.data_ptr()
    r = torch.add(na, nb, out=out)
    assert r is out and out.data_ptr() == ptr
    close(out, a + b)
    # wrong-sized out: must be resized to the result's shape
    out2 = torch.empty(5, device="neuron")
    with pytest.warns(UserWarning, match="resized"):
        torch.mul(na, nb, out=out2)
    assert out2.shape == (3, 4)
    close(out2, a * b)
    out3 = torch.empty(0, device="neuron")
    torch.matmul(na, nb.t(), out=out3)
    assert out3.shape == (3, 3)
    close(out3, a @ b.t())
    big = torch.empty(100, device="neuron")
    torch.sum(na, dim=0, out=big)
    assert big.shape == (4,)
    close(big, a.sum(dim=0))
    cat_out = torch.empty(1, device="neuron")
    torch.cat([na, nb], out=cat_out)
    close(cat_out, torch.cat([a, b]))
    # integer out of a different shape
    iout = torch.empty(2, 2, dtype=torch.int64, device="neuron")
    torch.argmax(na, dim=1, out=iout)
    assert iout.shape == (3,)
    close(iout, a.argmax(dim=1))


def test_in_place_ops():
    a, na = _pair(4, 4, seed=29)
    b, nb = _pair(4, 4, seed=30)
    ptr = na.data_ptr()
    a.add_(b).mul_(2).sub_(1)
    na.add_(nb).mul_(2).sub_(1)
    assert na.data_ptr() == ptr
    close(na, a)
    a.clamp_(min=0)
    na.clamp_(min=0)
    close(na, a)
    a.exp_()
    na.exp_()
    close(na, a)
    a.zero_()
    na.zero_()
    close(na, a)
    na.fill_(3.5)
    close(na, torch.full((4, 4), 3.5))
    na.copy_(nb)
    close(na, b)
    na.copy_(b.t())  # from CPU, transposed
    close(na, b.t())
    nb.addcmul_(nb, nb, value=0.5)
    b.addcmul_(b, b, value=0.5)
    close(nb, b)
    nb.masked_fill_(nb > 0.3, -2.0)
    b.masked_fill_(b > 0.3, -2.0)
    close(nb, b)
    i = torch.arange(8, dtype=torch.int64)
    ni = i.to("neuron")
    i += 5
    ni += 5
    close(ni, i)


@requires_two_devices
def test_cross_device_copy():
    a = torch.randn(64, 33)
    n0 = a.to("neuron:0")
    n1 = n0.to("neuron:1")
    assert n1.device == torch.device("neuron:1")
    assert n1.data_ptr() != n0.data_ptr()
    exact(n1.cpu(), a)
    dst = torch.empty(64, 33, device="neuron:1")
    dst.copy_(n0)
    exact(dst.cpu(), a)
    # strided source and a dtype change across cores
    half = n0.t().to("neuron:1", dtype=torch.float16)
    exact(half.cpu(), a.t().to(torch.float16))
    back = n1.to("neuron:0")
    n1.fill_(0)
    exact(back.cpu(), a)
    assert n1.sum().item() == 0


def test_item_and_tolist():
    assert torch.tensor(3.5, device="neuron").item() == 3.5
    assert torch.tensor(7, dtype=torch.int64, device="neuron").item() == 7
    assert torch.tensor(True, device="neuron").item() is True
    assert torch.tensor([2**40 + 1], dtype=torch.int64, device="neuron").item() == 2**40 + 1
    x = torch.arange(6, device="neuron").reshape(2, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert x[1, 2].item() == 5
    assert torch.tensor([1.5, -2.0], dtype=torch.bfloat16, device="neuron").tolist() == [1.5, -2.0]
    assert int(x.sum()) == 15 and float(x.float().mean()) == 2.5


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_histc_integer(dtype):
    data = [0, 1, 1, 2, 3, 3, 3, 9, 10, -1, 4]
    t = torch.tensor(data, dtype=dtype, device="neuron")
    hist = torch.histc(t, bins=5, min=0, max=10)
    # bins of width 2 over [0, 10]: [0,2) [2,4) [4,6) [6,8) [8,10]; -1 is outside
    assert hist.device.type == "neuron"
    assert hist.cpu().tolist() == [3, 4, 1, 0, 2]


def test_histc_float():
    x, nx = _pair(200, seed=31)
    close(torch.histc(nx, bins=7, min=-2, max=2), torch.histc(x, bins=7, min=-2, max=2))
    close(torch.histc(nx, bins=10), torch.histc(x, bins=10))
    out = torch.empty(0, device="neuron")
    assert torch.histc(nx, bins=10, out=out) is out and torch.equal(out.cpu(), torch.histc(x, bins=10))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_histc_refuses_an_out_on_another_device(dtype):
    """PyTorch's TestCommon.test_out found it: a CPU out= for neuron inputs was filled instead of refused."""
    x = torch.tensor([0, 1, 2, 3], dtype=dtype, device="neuron")
    cpu_out = torch.full((4,), 7.0, dtype=dtype)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.histc(x, bins=4, min=0, max=4, out=cpu_out)
    assert cpu_out.tolist() == [7, 7, 7, 7]  # untouched


def test_non_blocking_copies():
    cpu = torch.randn(1000, 17)
    n = cpu.to("neuron", non_blocking=True)
    back = n.to("cpu", non_blocking=True)
    torch.neuron.synchronize()
    exact(back, cpu)
    pinned = cpu.pin_memory()
    n2 = pinned.to("neuron", non_blocking=True)
    dst = torch.empty_like(cpu).pin_memory()
    dst.copy_(n2, non_blocking=True)
    torch.accelerator.synchronize()
    exact(dst, cpu)


def test_copies_from_many_threads():
    errors = []
    large = 1_500_000  # above the DMA engine's parallel threshold (2 MiB)

    def worker(seed):
        rng = random.Random(seed)
        g = torch.Generator().manual_seed(seed)
        try:
            for i in range(200):
                n = large if i % 50 == 7 else rng.randint(1, 5000)
                dtype = rng.choice([torch.float32, torch.int64, torch.float16, torch.uint8])
                src = (torch.randn(n, generator=g) * 100).to(dtype)
                dev = src.to(f"neuron:{seed % torch.neuron.device_count()}")
                back = dev.cpu()
                if not torch.equal(back, src):
                    errors.append((seed, i, n, dtype))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((seed, repr(e)))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "copy threads hung"
    assert errors == []


@pytest.mark.parametrize("tests", [[5], [2, 31999, 7], [], [3.0], list(range(0, 64000, 2))])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_against_cpu(tests, invert):
    """isin over a vocabulary against a few token ids (the device compares directly) or many (the CPU kernel)."""
    elements = torch.arange(32000).reshape(4, 8000)
    test_elements = torch.tensor(tests) if tests else torch.tensor([], dtype=torch.long)
    got = torch.isin(elements.to(N), test_elements.to(N), invert=invert)
    exact(got.cpu(), torch.isin(elements, test_elements, invert=invert))
    assert got.device.type == "neuron" and got.dtype == torch.bool
    scalar = torch.tensor(tests[0] if tests else 1)
    exact(torch.isin(scalar.to(N), test_elements.to(N), invert=invert).cpu(),
          torch.isin(scalar, test_elements, invert=invert))


def test_efficient_zero_tensor_is_a_zero_tensor():
    z = torch._efficientzerotensor((2, 3), device="neuron")
    assert z._is_zerotensor() and z.device.type == "neuron" and z.shape == (2, 3)
    assert torch.equal(z.cpu(), torch.zeros(2, 3))
    assert torch.equal((z + torch.ones(2, 3, device="neuron")).cpu(), torch.ones(2, 3))


def test_autograd_zero_tensor_paths_do_not_crash():
    # sgn's backward (and others) hand autograd efficient zero tensors.
    for device in ("cpu", "neuron"):
        x = torch.tensor([0.0, 1.5, -2.0], device=device, requires_grad=True)
        x.sgn().sum().backward()
        assert x.grad._is_zerotensor()  # as on CPU: a zero tensor, materialised by arithmetic
        assert (x.grad + 0).cpu().tolist() == [0.0, 0.0, 0.0]
        c = torch.tensor([1 + 1j, 0j], dtype=torch.complex64, device=device, requires_grad=True)
        c.sgn().abs().sum().backward()
        assert c.grad is not None and torch.isfinite(torch.view_as_real(c.grad.cpu())).all()


def test_conj_physical_in_place_on_complex64():
    c = torch.randn(3, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    n = c.to("neuron")
    assert n.conj_physical_() is n
    assert torch.equal(n.cpu(), c.conj_physical())
    real = torch.randn(3, device="neuron")
    assert torch.equal(real.clone().conj_physical_().cpu(), real.cpu())  # real tensors are their own conjugate


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("shapes,dim", [
    ([(8, 12, 25, 64), (8, 12, 1, 64)], 2),   # a decode step's key cache
    ([(8, 12, 25, 64), (8, 12, 1, 64)], -2),
    ([(3, 4), (5, 4), (1, 4)], 0),
    ([(3, 4), (3, 0), (3, 2)], 1),            # an empty part
    ([(2, 3, 4), (2, 3, 4)], -1),
    ([(0, 4), (0, 4)], 0),                    # nothing to copy: the CPU kernel
    ([(6,)], 0),
])
def test_cat_against_cpu(dtype, shapes, dim):
    """cat of contiguous tensors of one dtype (the device's block copies) and the rest (the CPU kernel)."""
    g = torch.Generator().manual_seed(len(shapes) + dim)
    parts = [(torch.randn(*s, generator=g) * 10).to(dtype) for s in shapes]
    got = torch.cat([p.to(N) for p in parts], dim)
    assert got.device.type == "neuron" and got.dtype == dtype
    exact(got.cpu(), torch.cat(parts, dim))


def test_cat_other_forms_keep_cpu_semantics():
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    exact(torch.cat([a.to(N).t(), b.to(N).t()], 0).cpu(), torch.cat([a.t(), b.t()], 0))  # non-contiguous
    mixed = torch.cat([a.to(N), torch.ones(2, 6, dtype=torch.float64, device=N)], 0)  # type promotion
    exact(mixed.cpu(), torch.cat([a, torch.ones(2, 6, dtype=torch.float64)], 0))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([a.to(N), torch.randn(4, 5, device=N)], 0)
    with pytest.raises(RuntimeError):
        torch.cat([torch.tensor(1.0, device=N), torch.tensor(2.0, device=N)])  # zero-dimensional
    legacy = torch.cat([torch.tensor([], device=N), a.to(N)], -2)  # DynamicCache's first step: an empty 1-D part
    exact(legacy.cpu(), torch.cat([torch.tensor([]), a], -2))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.cat([a.to(N), b.to(N)], 2)
    x = a.to(N).requires_grad_()
    torch.cat([x, x * 2], 1).sum().backward()
    exact(x.grad.cpu(), torch.full((4, 6), 3.0))


def test_out_left_lazily_conjugated_by_the_kernel():
    """linalg.lu_solve(left=False, out=) on complex tensors leaves `out` with the conjugate bit set (a lazy
    conjugate): the neuron tensor takes the bit with the data (it returned the conjugate of the answer)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, dtype=torch.complex64, generator=g)
    b = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    lu, pivots = torch.linalg.lu_factor(a)
    expected = torch.linalg.lu_solve(lu, pivots, b, left=False)
    out = torch.empty(4, 3, dtype=torch.complex64, device=N)
    torch.linalg.lu_solve(lu.to(N), pivots.to(N), b.to(N), left=False, out=out)
    close(out, expected, rtol=1e-5, atol=1e-5)
    close(out.resolve_conj(), expected, rtol=1e-5, atol=1e-5)
