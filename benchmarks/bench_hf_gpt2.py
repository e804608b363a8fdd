"""Greedy decode of a GPT-2-shaped model (768 hidden, 12 layers, vocabulary
32,000, random weights) on neuron against the CPU device, batch 1 and 4,
fp32 and bf16: ms per generated token. GPT-2 keeps its weights as [in, out]
and multiplies with torch.addmm(bias, x, W) (Conv1D), so these rows time the
device's decode kernels on the bias-and-[K, N] path that Llama does not take.
Decode excludes the prompt's prefill (a 1-token generate() is subtracted).
Target: never slower than the CPU device (the issue's rule for 1-8 rows).
"""
from __future__ import annotations

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

DECODE_TOKENS = 8


def build_model(dtype: torch.dtype):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=32000, n_positions=1024)
    return GPT2LMHeadModel(config).to(dtype).eval()


def decode_row(models, dtype_name: str, batch: int) -> Row:
    prompt = torch.randint(0, 32000, (batch, 16), generator=torch.Generator().manual_seed(1))
    inputs = {d: prompt.to(d) for d in models}

    def generate(device, new_tokens):
        with torch.no_grad():
            models[device].generate(inputs[device], attention_mask=torch.ones_like(inputs[device]),
                                    max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                    pad_token_id=0)

    fns = {}
    for d in models:
        fns[d] = lambda d=d: generate(d, 1 + DECODE_TOKENS)
        fns[d + " prefill"] = lambda d=d: generate(d, 1)
    res = common.time_interleaved(fns, devices={k: k.split()[0] for k in fns}, warmup=1, reps=common.repeats(3))
    per_token = {d: max(res[d] - res[d + " prefill"], 1e-9) / DECODE_TOKENS for d in models}
    return Row(f"GPT-2-shaped 124M decode {dtype_name} batch {batch}, per token", fmt_time(per_token["cpu"]),
               fmt_time(per_token[NEURON]), per_token[NEURON] / per_token["cpu"], "time", 1.0,
               noise=common.ratio_noise(res["cpu"], res[NEURON]), contention=common.others_share(res["cpu"]))


def run() -> list[Row]:
    rows = []
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        cpu_model = build_model(dtype)
        models = {"cpu": cpu_model, NEURON: copy.deepcopy(cpu_model).to(NEURON)}
        rows += [decode_row(models, name, batch) for batch in (1, 4)]
        del models, cpu_model
    return rows


if __name__ == "__main__":
    common.main(run)
