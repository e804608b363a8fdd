"""How far transformers' eager attention and its SDPA attention differ on neuron and on the CPU device.

transformers' `test_eager_matches_sdpa_inference` holds every device to a tolerance table that has rows for
CPU and CUDA only; this measures, for small random models of the families the conformance issue names
(fp32, bf16, fp16; a padded batch, a single sequence, and a decode step of the padded batch, where neuron
runs its own decode kernels), the largest difference between the two implementations' last hidden states
on each device, and between the devices.

  ./dev python3 tools/eager_vs_sdpa.py
"""
from __future__ import annotations

import torch

import torch_neuronx  # noqa: F401  (the neuron device)

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaModel", {}),
    "mistral": ("MistralConfig", "MistralModel", {}),
    "qwen2": ("Qwen2Config", "Qwen2Model", {}),
    "gemma": ("GemmaConfig", "GemmaModel", {"head_dim": 16}),
    "phi3": ("Phi3Config", "Phi3Model", {"pad_token_id": 0}),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def build(family: str, attention: str, dtype: torch.dtype):
    import transformers

    config_name, model_name, extra = FAMILIES[family]
    config = getattr(transformers, config_name)(vocab_size=99, hidden_size=64, intermediate_size=128,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                 max_position_embeddings=64, attn_implementation=attention, **extra)
    torch.manual_seed(0)
    return getattr(transformers, model_name)(config).to(dtype).eval()


def hidden(model, device: str, ids: torch.Tensor, mask: torch.Tensor, decode: bool) -> torch.Tensor:
    """The last hidden states of the whole input, or (decode) of its last token given the others' cache."""
    model = model.to(device)
    ids, mask = ids.to(device), mask.to(device)
    with torch.no_grad():
        if not decode:
            return model(input_ids=ids, attention_mask=mask).last_hidden_state.float().cpu()
        cache = model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], use_cache=True).past_key_values
        return model(input_ids=ids[:, -1:], attention_mask=mask, past_key_values=cache).last_hidden_state.float().cpu()


def main() -> None:
    ids = torch.randint(1, 99, (3, 12), generator=torch.Generator().manual_seed(1))
    padded = torch.ones_like(ids)
    padded[1, :4] = 0  # left padding, as generation batches
    padded[2, :7] = 0
    print("| family | dtype | inputs | eager vs sdpa, CPU | eager vs sdpa, neuron | neuron vs CPU, sdpa |")
    print("|---|---|---|---|---|---|")
    for family in FAMILIES:
        for dtype_name, dtype in DTYPES.items():
            for inputs, (x, mask, decode) in {
                    "padded batch of 3": (ids, padded, False),
                    "one sequence": (ids[:1], torch.ones_like(ids[:1]), False),
                    "padded batch of 3, a decode step": (ids, padded, True)}.items():
                out = {}
                for attention in ("eager", "sdpa"):
                    for device in ("cpu", "neuron"):
                        out[attention, device] = hidden(build(family, attention, dtype), device, x, mask, decode)
                # Padded query rows see no key: both implementations leave them undefined; compare real tokens.
                keep = mask[:, -1:].bool() if decode else mask.bool()
                diff = lambda a, b: (out[a][keep] - out[b][keep]).abs().max().item()  # noqa: E731
                print(f"| {family} | {dtype_name} | {inputs} | {diff(('eager', 'cpu'), ('sdpa', 'cpu')):.2e} | "
                      f"{diff(('eager', 'neuron'), ('sdpa', 'neuron')):.2e} | "
                      f"{diff(('sdpa', 'neuron'), ('sdpa', 'cpu')):.2e} |", flush=True)


if __name__ == "__main__":
    main()
