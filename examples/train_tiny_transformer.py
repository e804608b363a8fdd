"""make demo: train a small transformer language model on device "neuron".

The same job runs on the CPU device from the same seed; the two loss curves
must agree (the device computes with the same kernels on its own memory).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyTransformerLM(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, context: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(context, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        x = self.embed(tokens) + self.position[:length]
        return self.head(self.norm(self.blocks(x, mask=causal, is_causal=True)))


def make_corpus(vocab: int, length: int, generator: torch.Generator) -> torch.Tensor:
    # A learnable sequence: token t+1 = (a * t + b) mod vocab with a few noisy jumps.
    tokens = torch.empty(length, dtype=torch.long)
    tokens[0] = 1
    jumps = torch.rand(length, generator=generator) < 0.05
    for i in range(1, length):
        tokens[i] = torch.randint(vocab, (1,), generator=generator) if jumps[i] else (5 * tokens[i - 1] + 3) % vocab
    return tokens


def train(device: str, steps: int, args) -> list[float]:
    torch.manual_seed(0)
    corpus = make_corpus(args.vocab, 20_000, torch.Generator().manual_seed(1))
    model = TinyTransformerLM(args.vocab, args.dim, args.heads, args.layers, args.context).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = torch.Generator().manual_seed(2)
    losses = []
    for step in range(steps):
        starts = torch.randint(0, corpus.numel() - args.context - 1, (args.batch,), generator=batches)
        window = torch.stack([corpus[s : s + args.context + 1] for s in starts.tolist()]).to(device)
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), window[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if device != "cpu" and (step % 50 == 0 or step == steps - 1):
            print(f"  step {step:4d}  loss {losses[-1]:.4f}")
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()

    print(f"device neuron: {torch.neuron.get_device_name()} x {torch.neuron.device_count()}")
    start = time.perf_counter()
    neuron_losses = train("neuron", args.steps, args)
    neuron_seconds = time.perf_counter() - start
    start = time.perf_counter()
    cpu_losses = train("cpu", args.steps, args)
    cpu_seconds = time.perf_counter() - start

    # Neuron and CPU take different (equally valid) kernel paths in places
    # (attention, the optimizer's foreach path), so rounding differs in the
    # last bits and training trajectories drift apart slowly: early steps
    # must agree tightly, the end result to a few percent.
    worst = max(abs(a - b) for a, b in zip(neuron_losses[:20], cpu_losses[:20]))
    final_gap = abs(neuron_losses[-1] - cpu_losses[-1]) / cpu_losses[-1]
    print(f"neuron: {neuron_seconds:.1f}s, cpu: {cpu_seconds:.1f}s for {args.steps} steps")
    print(f"loss: first {neuron_losses[0]:.4f}, last {neuron_losses[-1]:.4f} (cpu last {cpu_losses[-1]:.4f})")
    print(f"largest loss difference neuron vs cpu over the first 20 steps: {worst:.2e}")
    print(f"final loss relative gap: {final_gap:.2%}")
    print(f"peak neuron memory: {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB")
    if worst > 1e-4 or final_gap > 0.1 or not neuron_losses[-1] < 0.5 * neuron_losses[0]:
        raise SystemExit("FAILED: the neuron run does not match the CPU run, or did not learn")
    print("OK: neuron matches the CPU device and the model learned")


if __name__ == "__main__":
    main()
