"""NKI kernels on neuron against torch on neuron, in one run:

- the tutorial-style tiled bf16 matmul, (1024x1024)^T by 1024x2048, against
  torch.matmul of the same tensors on neuron (target <= 2x its time);
- an RMSNorm written in NKI at [4096, 4096] fp32 against transformers'
  LlamaRMSNorm on neuron (target >= 1.3x its speed, i.e. <= 0.77x its time);
- replay overhead: a kernel of 4,000 one-element instructions, time per
  instruction (target <= 2 us);
- microscaling (NeuronCore-v4, no target): one fp8x4 nc_matmul_mx [128, 128] x [128, 512] against torch's
  fp32 product of the same values dequantized, and quantize_mx of a [128, 2048] bf16 tile against torch's
  cast of it to fp8;
- the same matmul as an AVX2-only CPU (AMD Zen 3) runs it, in a child process
  with the NKI executor and torch lowered to that kind (env/cpu_kinds.py):
  torch's bf16 GEMM then leaves oneDNN (ATen's mkldnn_bf16_device_check asks
  oneDNN, whose ISA ONEDNN_MAX_CPU_ISA caps) for its own loops.
The "cpu" column holds the torch reference on neuron.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

import nki  # noqa: E402  (resolves to torch_neuronx.nki without AWS's package)
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

# The kernels measured are the ones tested: the tutorial-style tiled matmul of the test suite and the
# RMSNorm the project ships in the kernels layout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from nki_kernels import matmul_tiled as matmul_bf16  # noqa: E402
import nki_mx_kernels as mx  # noqa: E402

from torch_neuronx.nki import hub  # noqa: E402

rmsnorm_kernel = hub.load_kernel(hub.SHIPPED).kernels.rmsnorm


def rmsnorm(x, weight):
    return rmsnorm_kernel(x, weight, 1e-6)


@nki.jit
def many_instructions(x, count):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    for _ in range(count):
        nisa.tensor_scalar(tile, tile, op0=nl.add, operand0=1.0)
    nl.store(out, value=tile)
    return out


def matmul_times(torch_reps: int) -> dict:
    """Seconds per call of the tiled NKI matmul and of torch.matmul on neuron (checked against each other)."""
    torch.manual_seed(0)
    lhsT = torch.randn(1024, 1024, dtype=torch.bfloat16, device=NEURON)
    rhs = torch.randn(1024, 2048, dtype=torch.bfloat16, device=NEURON)
    lhs = lhsT.T.contiguous()
    got, want = matmul_bf16(lhsT, rhs), torch.matmul(lhs, rhs)
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), rtol=2e-2, atol=2e-1)
    t = common.time_interleaved({"nki": lambda: matmul_bf16(lhsT, rhs)}, devices={"nki": NEURON},
                                reps=common.repeats(3))
    t.update(common.time_interleaved({"torch": lambda: torch.matmul(lhs, rhs)}, devices={"torch": NEURON},
                                     warmup=0 if torch_reps == 1 else 1, reps=torch_reps))
    return t


def mx_rows() -> list[Row]:
    torch.manual_seed(0)
    K, M, N = 128, 128, 512

    def packed(columns):  # random finite e4m3 values, four to a uint32
        values = ((torch.rand(K, 4 * columns) * 2 - 1) * 400).to(torch.float8_e4m3fn)
        return values.view(torch.uint8).view(torch.uint32)

    s, m = packed(M), packed(N)
    s_scales, m_scales = (torch.randint(117, 130, (K // 8, n), dtype=torch.uint8) for n in (M, N))
    args = [t.to(NEURON) for t in (s, s_scales, m, m_scales)]

    def dequantized(data, scales, columns):
        """Row 4k + j: value j of partition k's elements, times its group's scale (as nc_matmul_mx reads)."""
        values = data.view(torch.uint8).view(torch.float8_e4m3fn).float().reshape(K, columns, 4)
        factors = torch.pow(2.0, scales.float() - 127).repeat_interleave(8, dim=0)[:, :, None]
        return (values * factors).permute(0, 2, 1).reshape(4 * K, columns).to(NEURON)
    a, b = dequantized(s, s_scales, M), dequantized(m, m_scales, N)

    def kernel():
        return mx.matmul_mx(*args, nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4, 1)

    want = (a.T @ b).cpu()  # both sum 512 products in fp32, in different orders
    torch.testing.assert_close(kernel().cpu(), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
    t = common.time_interleaved({"torch": lambda: a.T @ b, "nki": kernel}, devices={"torch": NEURON, "nki": NEURON},
                                reps=common.repeats(5))
    rows = [Row("NKI MX matmul fp8x4 [128, 128] x [128, 512] (torch's fp32 matmul of the dequantized values on "
                "neuron as reference)", fmt_time(t["torch"]), fmt_time(t["nki"]), t["nki"] / t["torch"], "time",
                None, noise=common.ratio_noise(t["torch"], t["nki"]))]
    x = torch.randn(128, 2048, dtype=torch.bfloat16, device=NEURON)
    t = common.time_interleaved({"torch": lambda: x.to(torch.float8_e4m3fn),
                                 "nki": lambda: mx.quantize_mx(x, nl.float8_e4m3fn_x4)},
                                devices={"torch": NEURON, "nki": NEURON}, reps=common.repeats(5))
    rows.append(Row("NKI quantize_mx [128, 2048] bf16 to fp8x4 with scales (torch's cast to fp8 on neuron as "
                    "reference)", fmt_time(t["torch"]), fmt_time(t["nki"]), t["nki"] / t["torch"], "time", None,
                    noise=common.ratio_noise(t["torch"], t["nki"])))
    return rows


def _avx2_child() -> None:
    t = matmul_times(torch_reps=1)
    print(json.dumps({k: float(v) for k, v in t.items()}))


def avx2_matmul_row() -> list[Row]:
    import torch_neuronx

    if torch_neuronx._C._simd_level().split()[0] in ("scalar", "avx2"):
        return []  # this CPU is the AVX2 kind: the main row measures it
    env = common.cpu_kind_env("avx2")
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--avx2-child"], env=env,
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"the AVX2 matmul child failed:\n{result.stderr[-3000:]}")
    t = json.loads(result.stdout.strip().splitlines()[-1])
    return [Row("[simd avx2] NKI tiled matmul bf16 1024x1024 @ 1024x2048 (torch.matmul without AVX-512 as reference)",
                fmt_time(t["torch"]), fmt_time(t["nki"]), t["nki"] / t["torch"], "time", 2.0,
                note="the NKI executor and torch both lowered to the AVX2 kind (env/cpu_kinds.py): without "
                     "AVX-512, torch leaves bf16 GEMMs to its own loops, not oneDNN (one timed call)")]


def run() -> list[Row]:
    rows = []
    t = matmul_times(torch_reps=common.repeats(3))
    rows.append(Row("NKI tiled matmul bf16 1024x1024 @ 1024x2048 (torch.matmul on neuron as reference)",
                    fmt_time(t["torch"]), fmt_time(t["nki"]), t["nki"] / t["torch"], "time", 2.0,
                    noise=common.ratio_noise(t["torch"], t["nki"]), contention=common.others_share(t["nki"])))

    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    x = torch.randn(4096, 4096, device=NEURON)
    norm = LlamaRMSNorm(4096, eps=1e-6).to(NEURON)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(4096))
        torch.testing.assert_close(rmsnorm(x, norm.weight).cpu(), norm(x).cpu(), rtol=1e-4, atol=1e-4)
        t = common.time_interleaved({"hf": lambda: norm(x), "nki": lambda: rmsnorm(x, norm.weight)},
                                    devices={"hf": NEURON, "nki": NEURON}, reps=common.repeats(3))
    rows.append(Row("NKI RMSNorm [4096, 4096] fp32 (transformers' LlamaRMSNorm on neuron as reference)",
                    fmt_time(t["hf"]), fmt_time(t["nki"]), t["nki"] / t["hf"], "time", 1 / 1.3,
                    noise=common.ratio_noise(t["hf"], t["nki"]), contention=common.others_share(t["nki"])))

    small = torch.zeros(1, 1, device=NEURON)
    count = 4000
    assert many_instructions(small, count).item() == count
    t = common.time_interleaved({"one": lambda: many_instructions(small, 1),
                                 "many": lambda: many_instructions(small, count)},
                                devices={"one": NEURON, "many": NEURON}, reps=common.repeats(5))
    per = (t["many"] - t["one"]) / (count - 1)
    rows.append(Row("NKI replay overhead per one-element instruction (4,000 of them)", "-", fmt_time(per),
                    per / 2e-6, "time", 1.0, note="ratio = time per instruction / the 2 us target"))
    return rows + mx_rows() + avx2_matmul_row()


if __name__ == "__main__":
    if "--avx2-child" in sys.argv:
        _avx2_child()
    else:
        common.main(run)
