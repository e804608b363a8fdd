"""The device's own decode kernels (aten/kernels/) against float64 or CPU references: one-row and few-row
products (x @ W^T and x @ W, with and without bias, into out=, from many threads), their independence of
the rows' layout, attention for decode's few query rows (and the CPU fused kernel beyond them), and all of
it again at each lower SIMD level."""
import threading

import pytest
import torch
import torch.nn.functional as F

from conftest import close

N = torch.device("neuron:0")


@pytest.mark.parametrize("rows,cols", [(1, 7), (5, 768), (768, 768), (2048, 768), (768, 2048), (32000, 768),
                                       (1001, 33), (3, 2049), (300, 96), (300, 160)])
def test_one_row_linear_bf16(rows, cols):
    """Decode's one-row bf16 products (the streamed few-row kernel with one row, split across cores) against an fp32
    CPU product."""
    g = torch.Generator().manual_seed(rows * 7 + cols)
    w = torch.randn(rows, cols, generator=g).to(torch.bfloat16)
    x = torch.randn(1, cols, generator=g).to(torch.bfloat16)
    got = F.linear(x.to(N), w.to(N))
    assert got.dtype == torch.bfloat16 and got.shape == (1, rows)
    expected = (x.float() @ w.float().t()).to(torch.bfloat16)  # fp32 accumulation, one bf16 rounding
    close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype,batch", [(torch.float32, 2), (torch.float32, 5), (torch.float32, 7), (torch.float32, 8),
                                         (torch.float32, 9), (torch.bfloat16, 2), (torch.bfloat16, 3), (torch.bfloat16, 5),
                                         (torch.bfloat16, 7), (torch.bfloat16, 8), (torch.bfloat16, 16),
                                         (torch.bfloat16, 17)])
@pytest.mark.parametrize("rows,cols", [(2048, 768), (1001, 33), (1001, 64), (5, 2049), (300, 4096), (300, 160)])
def test_few_row_linear(dtype, batch, rows, cols):
    """Batched decode's few-row products (the device's streamed kernel up to 8 rows, bf16 on AMX tiles up to 16
    rows where K is a multiple of 32, the CPU GEMM beyond) against a float64 product rounded once."""
    g = torch.Generator().manual_seed(rows + cols + batch)
    w = torch.randn(rows, cols, generator=g).to(dtype)
    x = torch.randn(batch, cols, generator=g).to(dtype)
    got = F.linear(x.to(N), w.to(N))
    assert got.dtype == dtype and got.shape == (batch, rows) and got.is_contiguous()
    expected = (x.double() @ w.double().t()).to(dtype)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=2e-2)
    close(got, expected, **tol)
    # Through autograd too: the backward's products go to the CPU GEMM, the forward to the device's kernel.
    xn = x.to(N).requires_grad_()
    F.linear(xn, w.to(N)).sum().backward()
    close(xn.grad, (torch.ones(batch, rows, dtype=torch.float64) @ w.double()).to(dtype), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_decode_products_do_not_depend_on_the_rows_layout(dtype, batch):
    """Strided left rows give the contiguous rows' product bit for bit (as on the CPU device), for x @ W^T
    (F.linear) and x @ W, with and without bias, and under autograd (the gradients' products)."""
    g = torch.Generator().manual_seed(batch)
    w = torch.randn(300, 96, generator=g).to(dtype).to(N)
    bias = torch.randn(300, generator=g).to(dtype).to(N)
    x = torch.randn(batch, 96, generator=g).to(dtype).to(N)
    strided = torch.zeros(batch, 192, dtype=dtype, device=N)[:, ::2]
    strided.copy_(x)
    assert not strided.is_contiguous()
    for a, b in ((F.linear(x, w), F.linear(strided, w)), (F.linear(x, w, bias), F.linear(strided, w, bias)),
                 (x @ w.t().contiguous(), strided @ w.t().contiguous())):
        assert torch.equal(a.cpu(), b.cpu())
    grads = []
    for rows in (x, strided):
        leaf = w.detach().clone().requires_grad_()
        F.linear(rows, leaf).sum().backward()
        grads.append(leaf.grad.cpu())
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k,n", [(768, 2048), (33, 7), (5, 1001), (2048, 300), (17, 1090)])
@pytest.mark.parametrize("batch", [1, 3, 7, 8, 9])
def test_rows_times_matrix(dtype, k, n, batch):
    """x @ W and addmm(bias, x, W) with W stored [K, N] (GPT-2's Conv1D; up to 8 rows, 6 fp32 rows without
    AVX-512, against a contiguous matrix: the device's column-band kernel, blocks of 8 matrix rows and the
    rest one by one, bands of 64 columns and a short last one; more rows: the CPU GEMM) against a float64
    product rounded once."""
    g = torch.Generator().manual_seed(k * 3 + n + batch)
    x = torch.randn(batch, k, generator=g).to(dtype)
    w = torch.randn(k, n, generator=g).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=2e-2)
    got = x.to(N) @ w.to(N)
    assert got.dtype == dtype and got.shape == (batch, n)
    close(got, (x.double() @ w.double()).to(dtype), **tol)
    got = torch.addmm(bias.to(N), x.to(N), w.to(N))
    assert got.dtype == dtype and got.shape == (batch, n)
    close(got, (bias.double() + x.double() @ w.double()).to(dtype), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 4])
def test_decode_products_into_out(dtype, batch):
    """mm.out and addmm.out (what Inductor's generated code calls) take the same decode kernels as mm and
    addmm: bit-equal to them; a non-contiguous out= and beta != 1 go to the CPU GEMM and still give the right
    product; an out= over an input gets the product of the inputs as they were (mm, addmm, bmm)."""
    g = torch.Generator().manual_seed(batch)
    w = torch.randn(300, 256, generator=g).to(dtype).to(N)
    x = torch.randn(batch, 256, generator=g).to(dtype).to(N)
    bias = torch.randn(300, generator=g).to(dtype).to(N)
    out = torch.empty(batch, 300, dtype=dtype, device=N)
    assert torch.equal(torch.mm(x, w.t(), out=out).cpu(), torch.mm(x, w.t()).cpu())
    assert torch.equal(torch.addmm(bias, x, w.t(), out=out).cpu(), torch.addmm(bias, x, w.t()).cpu())
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=5e-2)
    expected = (x.cpu().double() @ w.cpu().double().t()).to(dtype)
    strided = torch.empty(300, batch, dtype=dtype, device=N).t()
    close(torch.mm(x, w.t(), out=strided), expected, **tol)
    close(torch.addmm(bias, x, w.t(), beta=2, out=out), (expected.double() + 2 * bias.cpu().double()).to(dtype), **tol)
    # out= over the weight it reads: the CPU GEMM's threads would race with their own writes (the CPU
    # device's answer changes from run to run); neuron multiplies the inputs as they were, then stores.
    square = torch.randn(256, 256, generator=g).to(dtype)
    rows = torch.randn(batch, 256, generator=g).to(dtype)
    product = torch.mm(rows.to(N), square.to(N).t()).cpu()
    on_neuron = square.to(N)
    torch.mm(rows.to(N), on_neuron.t(), out=on_neuron[:batch])
    assert torch.equal(on_neuron[:batch].cpu(), product)
    assert torch.equal(on_neuron[batch:].cpu(), square[batch:])
    torch.testing.assert_close(product, (rows.double() @ square.double().t()).to(dtype), **tol)
    on_neuron = square.to(N)
    torch.addmm(on_neuron[0], rows.to(N), on_neuron.t(), beta=0.5, out=on_neuron[:batch])
    close(on_neuron[:batch], (0.5 * square[0].double() + rows.double() @ square.double().t()).to(dtype), **tol)
    stack, gram = square.view(4, 64, 256), square.view(4, 64, 256).double()
    on_neuron = stack.to(N)
    torch.bmm(on_neuron, on_neuron.transpose(1, 2), out=on_neuron[:, :, :64])
    close(on_neuron[:, :, :64], (gram @ gram.transpose(1, 2)).to(dtype), **tol)
    assert torch.equal(on_neuron[:, :, 64:].cpu(), stack[:, :, 64:])
    # An out= of another dtype is refused as on CPU, not cast into.
    buffer = square.to(N)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.mm(buffer[:batch], buffer.t(), out=buffer.view(torch.int16)[:batch])
    assert torch.equal(buffer.cpu(), square)


def test_one_row_linear_bf16_from_many_threads():
    """Products issued by several threads at once (the helper threads serve one at a time) stay correct."""
    g = torch.Generator().manual_seed(3)
    weights = [torch.randn(2048, 768, generator=g).to(torch.bfloat16) for _ in range(4)]
    xs = [torch.randn(1, 768, generator=g).to(torch.bfloat16) for _ in range(4)]
    expected = [(x.float() @ w.float().t()).to(torch.bfloat16).float() for x, w in zip(xs, weights)]
    device_weights = [w.to(N) for w in weights]
    failures = []

    def worker(i):
        x = xs[i].to(N)
        for _ in range(30):
            got = F.linear(x, device_weights[i]).cpu().float()
            if not torch.allclose(got, expected[i], rtol=1e-2, atol=1e-2):
                failures.append(i)
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, f"wrong products in threads {failures}"


@pytest.mark.parametrize("mask", ["causal", "float", "none"])
def test_scaled_dot_product_attention_runs_the_cpu_fused_kernel(mask):
    """Beyond decode's few query rows, neuron picks attention kernels as the CPU device does: bit-identical."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 24, 16) * 3 for _ in range(3))
    kwargs = {"is_causal": True} if mask == "causal" else {}
    attn_mask = torch.randn(24, 24) if mask == "float" else None
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=attn_mask, **kwargs)
    got = F.scaled_dot_product_attention(
        qn, kn, vn, attn_mask=None if attn_mask is None else attn_mask.to("neuron"), **kwargs)
    assert torch.equal(got.cpu(), ref)
    ref.sum().backward()
    got.sum().backward()
    for a, b in ((qc, qn), (kc, kn), (vc, vn)):
        assert torch.equal(b.grad.cpu(), a.grad)


def _attention_reference(q, k, v, mask, is_causal):
    """Attention by hand in float64: softmax(q k^T / sqrt(E) + mask) v, key/value heads shared by query groups."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if is_causal:
        scores = scores.masked_fill(~torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.double()
    probs = torch.softmax(scores, -1).nan_to_num(0.0)  # a row with every key masked attends to nothing
    return probs @ v


DECODE_CASES = {
    "one query": dict(B=1, H=12, KV=12, L=1, S=37, E=64),
    "batch, grouped heads": dict(B=3, H=8, KV=2, L=1, S=130, E=72),
    "few queries, causal": dict(B=2, H=4, KV=4, L=5, S=11, E=16, causal=True),
    "float mask": dict(B=2, H=4, KV=2, L=2, S=9, E=24, mask="float"),
    "bool mask, a row fully masked": dict(B=2, H=4, KV=4, L=2, S=9, E=16, mask="bool"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", list(DECODE_CASES))
def test_decode_attention_against_float64(case, dtype):
    """Decode steps (a few query rows against a cache) run the device's own attention kernel: forward against a
    float64 hand computation, layout as on CPU, and gradients through the CPU backward against the CPU device."""
    c = DECODE_CASES[case]
    g = torch.Generator().manual_seed(len(case))
    q = torch.randn(c["B"], c["L"], c["H"], c["E"], generator=g).to(dtype).transpose(1, 2)  # as models make it
    k, v = (torch.randn(c["B"], c["KV"], c["S"], c["E"], generator=g).to(dtype) for _ in range(2))
    mask = None
    if c.get("mask") == "float":
        mask = torch.randn(c["B"], 1, c["L"], c["S"], generator=g).to(dtype)
    elif c.get("mask") == "bool":
        mask = torch.rand(c["B"], 1, c["L"], c["S"], generator=g) > 0.3
        mask[..., 0] = True
        mask[1, 0, 1] = False
    causal = c.get("causal", False)
    kwargs = dict(is_causal=causal, enable_gqa=c["H"] != c["KV"])
    qn, kn, vn = (t.to(N).requires_grad_() for t in (q, k, v))
    got = F.scaled_dot_product_attention(qn, kn, vn, attn_mask=None if mask is None else mask.to(N), **kwargs)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    expected = _attention_reference(q, k, v, mask, causal)
    torch.testing.assert_close(got.cpu().double(), expected, **tol)
    if mask is not None and mask.dtype == torch.bool:
        assert got[1, :, 1].abs().max().item() == 0.0, "a query that sees no key gets zeros, as on CPU"

    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, **kwargs)
    assert got.stride() == ref.stride()
    weights = torch.randn(ref.shape, generator=g).to(dtype)
    (ref * weights).sum().backward()
    (got * weights.to(N)).sum().backward()
    for cpu_leaf, neuron_leaf in ((qc, qn), (kc, kn), (vc, vn)):
        torch.testing.assert_close(neuron_leaf.grad.cpu(), cpu_leaf.grad, **tol)


def test_decode_attention_large_cache_split_across_cores():
    """A long cache makes the kernel split its rows over helper threads; results equal the float64 reference."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 16, 1, 64, generator=g)
    k, v = (torch.randn(2, 16, 2048, 64, generator=g) for _ in range(2))
    got = F.scaled_dot_product_attention(q.to(N), k.to(N), v.to(N))
    torch.testing.assert_close(got.cpu().double(), _attention_reference(q, k, v, None, False), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512", "avx512bf16"])
def test_decode_kernels_under_each_simd_level(level):
    """The device's decode kernels on CPUs with less SIMD (TORCH_NEURONX_SIMD lowers the level this CPU uses):
    the one-row, few-row and row-times-matrix products and decode attention tests above, in a fresh process."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_NEURONX_SIMD=level)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
               "-k", "linear or attention or matrix or bias"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
