"""nki-llama-kernels: Llama's RMSNorm, SiLU-and-multiply MLP activation and
rotary embedding as NKI kernels behind torch custom ops, in the Hugging Face
`kernels` layout (build/torch-neuron/<package>)."""
import torch

from torch_neuronx import nki_op

from . import kernels, layers  # noqa: F401


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).contiguous()


@nki_op("nki_llama_kernels::rms_norm")
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return kernels.rmsnorm(_rows(x), weight.contiguous(), eps).reshape(x.shape)


@nki_op("nki_llama_kernels::silu_and_mul")
def silu_and_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return kernels.silu_and_mul(_rows(gate), _rows(up)).reshape(gate.shape)


@nki_op("nki_llama_kernels::rotary")
def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return kernels.rotary(_rows(x), _rows(cos.expand_as(x)), _rows(sin.expand_as(x))).reshape(x.shape)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' apply_rotary_pos_emb, with the rotation in NKI."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return rotary(q, cos, sin), rotary(k, cos, sin)
