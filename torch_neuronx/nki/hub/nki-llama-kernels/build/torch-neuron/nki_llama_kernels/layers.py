"""Layers in the `kernels` convention: no __init__ of their own; their forward
runs on the attributes of the module it replaces (transformers' LlamaRMSNorm:
weight, variance_epsilon; LlamaMLP: gate_proj, up_proj, down_proj)."""
import torch


class RMSNorm(torch.nn.Module):
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.ops.nki_llama_kernels.rms_norm(hidden_states, self.weight, self.variance_epsilon)


class SiluAndMulMLP(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = torch.ops.nki_llama_kernels.silu_and_mul(self.gate_proj(x), self.up_proj(x))
        return self.down_proj(activated)
