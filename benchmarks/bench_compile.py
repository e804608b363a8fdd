"""torch.compile on the Llama of bench_hf_llama (about 125M parameters, random
weights), in one run:

- greedy decode with a StaticCache, batch 1, fp32: compiled neuron (backend
  "neuron", and torch's default backend, Inductor, on neuron tensors) against
  neuron eager and against the same model compiled by Inductor on the CPU
  device, and the fraction of the read-bandwidth floor it reaches; per token
  means the decode steps alone (the prompt's prefill is timed and subtracted);
- cold compile time of the decode graph against Inductor-on-CPU's, and the
  compile time left in a second process that finds the graph in the cache
  (each measured in a fresh process with its own empty cache);
- a compiled training step of a smaller Llama against the eager step.

The reference column holds the baseline named in each row. Run it through
./dev, which sets OMP_WAIT_POLICY=passive (see dev): with spinning OpenMP
threads, every column here is several times slower on 2 cores.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

NEW_TOKENS = 16


def build_model(dtype=torch.float32, **overrides):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                  num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=2048,
                  tie_word_embeddings=False)
    config.update(overrides)
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**config)).to(dtype).eval()


def compile_config(backend: str):
    from transformers import CompileConfig

    config = CompileConfig(backend=backend, mode="default")
    config._compile_all_devices = True  # transformers auto-compiles only on accelerators; CPU is the reference
    return config


def generate(model, ids, backend: str | None, new_tokens: int = NEW_TOKENS):
    kwargs = dict(disable_compile=True) if backend is None else dict(compile_config=compile_config(backend))
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                              cache_implementation="static", **kwargs)


def decode_rows(bandwidth: float) -> list[Row]:
    cpu_model = build_model()
    neuron_model = build_model().to(NEURON)
    prompt = torch.randint(0, 32000, (1, 16), generator=torch.Generator().manual_seed(1))
    backends = {"neuron eager": None, "neuron compiled": "neuron", "neuron default": "inductor",
                "cpu inductor": "inductor"}
    models = {name: cpu_model if name.startswith("cpu") else neuron_model for name in backends}
    prompt_on = {name: prompt if name.startswith("cpu") else prompt.to(NEURON) for name in backends}
    runs = {name: (lambda name=name: generate(models[name], prompt_on[name], backends[name])) for name in backends}
    tokens = {name: run().cpu() for name, run in runs.items()}  # also compiles
    for route in ("neuron compiled", "neuron default"):
        assert torch.equal(tokens[route], tokens["neuron eager"]), f"{route}: greedy tokens differ from eager"
    # Decode alone, as bench_hf_llama measures it: each route's generate() of NEW_TOKENS minus one of a
    # single token (the prompt's eager prefill), so that the prefill does not count against decode.
    prompt_only = {f"{name} prefill": (lambda name=name: generate(models[name], prompt_on[name], backends[name], 1))
                   for name in runs}
    timed = {**runs, **prompt_only}
    res = common.time_interleaved(timed, devices={k: "cpu" if k.startswith("cpu") else NEURON for k in timed},
                                  warmup=1, reps=common.repeats(3))
    per_token = {k: max(res[k] - res[f"{k} prefill"], 1e-9) / (NEW_TOKENS - 1) for k in runs}
    compiled, eager, inductor = per_token["neuron compiled"], per_token["neuron eager"], per_token["cpu inductor"]
    param_bytes = sum(p.numel() * p.element_size() for p in neuron_model.parameters())
    floor = param_bytes / bandwidth
    noise = common.ratio_noise(res["neuron eager"], res["neuron compiled"])
    return [
        Row("Llama-125M StaticCache decode fp32 b1 per token: neuron eager (ref) vs neuron compiled",
            fmt_time(eager), fmt_time(compiled), compiled / eager, "time", 1 / 1.3, noise=noise),
        Row("Llama-125M StaticCache decode fp32 b1 per token: Inductor on CPU (ref) vs neuron compiled",
            fmt_time(inductor), fmt_time(compiled), compiled / inductor, "time", 0.5,
            noise=common.ratio_noise(res["cpu inductor"], res["neuron compiled"])),
        Row("Llama-125M StaticCache decode fp32 b1 per token: Inductor on CPU (ref) vs Inductor on neuron",
            fmt_time(inductor), fmt_time(per_token["neuron default"]), per_token["neuron default"] / inductor,
            "time", 1.0, noise=common.ratio_noise(res["cpu inductor"], res["neuron default"])),
        Row(f"Llama-125M compiled decode fp32 b1, fraction of read-bandwidth floor ({fmt_time(floor)}/token)",
            f"{floor / inductor * 100:.0f}%", f"{floor / compiled * 100:.0f}%", floor / compiled, "fraction", 0.7,
            percent=True),
    ]


CHILD = """
import json, sys, time, torch
sys.path.insert(0, {here!r})
import bench_compile as b
device = {device!r}
model = b.build_model().to(device)
ids = torch.randint(0, 32000, (1, 16), generator=torch.Generator().manual_seed(1)).to(device)
t0 = time.perf_counter(); b.generate(model, ids, {backend!r}); first = time.perf_counter() - t0
t0 = time.perf_counter(); b.generate(model, ids, {backend!r}); steady = time.perf_counter() - t0
import torch_neuronx
backend = sum(r.compile_seconds for r in torch_neuronx.compile_records())
print(json.dumps({{"compile": first - steady, "backend": backend}}))
"""


def _compile_seconds(device: str, backend: str, cache: str) -> dict:
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=os.path.join(cache, "neff"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
    code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)), device=device, backend=backend)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"compile-time child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compile_time_rows() -> list[Row]:
    with tempfile.TemporaryDirectory() as neuron_cache, tempfile.TemporaryDirectory() as cpu_cache:
        inductor_cold = _compile_seconds("cpu", "inductor", cpu_cache)
        neuron_cold = _compile_seconds(NEURON, "neuron", neuron_cache)
        neuron_warm = _compile_seconds(NEURON, "neuron", neuron_cache)
    return [
        Row("Llama-125M decode graph, first call minus a later call, cold cache: Inductor on CPU (ref) vs neuron",
            f"{inductor_cold['compile']:.1f} s", f"{neuron_cold['compile']:.1f} s",
            neuron_cold["compile"] / inductor_cold["compile"], "time", 1.2),
        Row("Llama-125M decode graph, time in the neuron backend: cold (ref) vs second process, warm cache",
            f"{neuron_cold['backend']:.1f} s", f"{neuron_warm['backend']:.1f} s",
            neuron_warm["backend"] / neuron_cold["backend"], "time", 0.10,
            note=f"first call minus a later call, warm: {neuron_warm['compile']:.1f} s (Dynamo's tracing included)"),
    ]


def training_row() -> Row:
    base = build_model(vocab_size=8000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=4).train()
    batch = torch.randint(0, 8000, (4, 128), generator=torch.Generator().manual_seed(3)).to(NEURON)
    steps = {}
    for name in ("eager", "compiled"):
        model = build_model(vocab_size=8000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=4).train().to(NEURON)
        model.load_state_dict(base.state_dict())
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        forward = torch.compile(model, backend="neuron") if name == "compiled" else model

        def step(forward=forward, optimizer=optimizer):
            loss = forward(batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.item()

        steps[name] = step
    res = common.time_interleaved(steps, devices={"eager": NEURON, "compiled": NEURON}, warmup=1,
                                  reps=common.repeats(3))
    return Row("Llama-19M training step (batch 4 x 128) fp32: neuron eager (ref) vs compiled",
               fmt_time(res["eager"]), fmt_time(res["compiled"]), res["compiled"] / res["eager"], "time", 1.0,
               noise=common.ratio_noise(res["eager"], res["compiled"]))


def run() -> list[Row]:
    rows = decode_rows(common.read_bandwidth())
    rows.append(training_row())
    rows += compile_time_rows()
    return rows


if __name__ == "__main__":
    common.main(run)
