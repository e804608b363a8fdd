"""make demo: train a small Llama with the Hugging Face stack on device "neuron", end to end.

Nothing is downloaded. A byte-level BPE tokenizer is trained on English text that Debian ships
(license texts, package copyright files, Python stdlib docstrings), a randomly initialised Llama is
trained on that text with transformers' Trainer, saved, reloaded with device_map, and asked to
continue a few prompts. The script exits non-zero if the model did not learn, so it doubles as a check.

    ./dev python3 examples/hf_finetune_demo.py                 # on neuron:0
    ./dev python3 examples/hf_finetune_demo.py --device cpu    # the same job on the CPU device
"""
import argparse
import ast
import gc
import glob
import hashlib
import math
import os
import resource
import shutil
import sys
import sysconfig
import tempfile
import time

# The matmuls of this model are small, and OpenBLAS's worker threads busy-wait for each other: on a 2-core
# machine that also runs anything else, one BLAS thread trains 2-3x faster than two (the device computes
# with the CPU device's GEMM libraries, so both devices get the same setting). Set before torch loads BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402  (also loads the neuron device through torch's backend autoload)
import torch_neuronx  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,  # noqa: E402
                          PreTrainedTokenizerFast, Trainer, TrainingArguments, default_data_collator,
                          set_seed)
from transformers.utils import logging as hf_logging  # noqa: E402

PROMPTS = ["This program is free software", "Permission is hereby granted", "Return the number of",
           "The GNU General Public License"]


def local_corpus() -> list[str]:
    """A few MB of English-ish prose that every Debian system has, one string per document."""
    docs, seen = [], set()

    def add(text: str) -> None:
        # Many packages ship byte-identical copyright files; duplicates would only teach memorisation.
        key = hashlib.sha1(text.encode()).digest()
        if len(text) > 200 and key not in seen:
            seen.add(key)
            docs.append(text)

    for path in sorted(glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/copyright")):
        with open(path, errors="replace") as f:
            add(f.read())
    # Docstrings rather than whole modules: prose, not code, is what the prompts ask for.
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(f"{stdlib}/**/*.py", recursive=True)):
        if "/test" in path or "site-packages" in path:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, ValueError):
            continue
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        add("\n\n".join(d for n in ast.walk(tree) if isinstance(n, kinds) and (d := ast.get_docstring(n))))
    return docs


def build_tokenizer(docs: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    # Byte-level: every byte has a token, so no input is ever <unk>, as with GPT-2 and Llama 3.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    # Prompts at generation time must start like the training documents do: with <s>.
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    # Left padding: a batch of prompts must end at the same position for generate() to continue them.
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", padding_side="left")


class Blocks(torch.utils.data.Dataset):
    """The token stream cut into fixed-length blocks: no padding, every position is a target."""

    def __init__(self, ids: torch.Tensor, block: int):
        self.data = ids[: len(ids) // block * block].view(-1, block)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        # labels == input_ids: LlamaForCausalLM shifts them by one itself.
        return {"input_ids": self.data[i], "labels": self.data[i]}


def sparkline(values: list[float]) -> str:
    bars, lo, hi = "▁▂▃▄▅▆▇█", min(values), max(values)
    return "".join(bars[round((v - lo) / (hi - lo + 1e-9) * (len(bars) - 1))] for v in values)


def memory_report(device: str) -> None:
    # Device memory is host memory owned by the emulated runtime, so the process RSS contains it too.
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if device == "neuron":
        print(torch.neuron.memory_summary())
        print(f"  memory_allocated {torch.neuron.memory_allocated() / 2**20:.1f} MiB, "
              f"max_memory_allocated {torch.neuron.max_memory_allocated() / 2**20:.1f} MiB, "
              f"memory_reserved {torch.neuron.memory_reserved() / 2**20:.1f} MiB")
    else:
        print("  the CPU device keeps no allocator statistics; process peak RSS is the closest equivalent")
    print(f"  process peak RSS {peak_rss:.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["neuron", "cpu"], default="neuron")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--block", type=int, default=128, help="tokens per training sequence")
    parser.add_argument("--vocab", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast for training (fp32 master weights)")
    parser.add_argument("--output-dir", default=None, help="where to save model and tokenizer (default: a temp dir)")
    args = parser.parse_args()
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="hf_finetune_demo_")
    hf_logging.set_verbosity_warning()
    timings = {}

    if args.device == "neuron":
        props = torch.neuron.get_device_properties(0)
        print(f"device: {props.name} x {torch.neuron.device_count()}, {props.total_memory / 2**30:.0f} GiB HBM each "
              f"(emulated on the host CPU)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s) on {os.cpu_count()} CPUs, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, output dir: {output_dir}")

    # 1. Tokenizer, trained from scratch on local text.
    start = time.perf_counter()
    docs = local_corpus()
    tokenizer = build_tokenizer(docs, args.vocab)
    # The Rust tokenizer encodes in parallel; </s> closes each document so the model learns where text ends.
    ids = [i for enc in tokenizer.backend_tokenizer.encode_batch(docs) for i in enc.ids + [tokenizer.eos_token_id]]
    ids = torch.tensor(ids, dtype=torch.long)
    timings["tokenizer (train + encode)"] = time.perf_counter() - start
    print(f"corpus: {len(docs)} documents, {sum(map(len, docs)) / 1e6:.1f} M chars -> {len(ids) / 1e6:.2f} M tokens "
          f"({sum(map(len, docs)) / len(ids):.1f} chars/token), vocab {len(tokenizer)}")

    # Every 50th block is held out: the final check asks for learning, not only memorisation.
    # 32 of them, spread over the whole corpus, keep evaluation to a few seconds.
    blocks = Blocks(ids, args.block)
    held_out = list(range(0, len(blocks), 50))
    train_set = torch.utils.data.Subset(blocks, [i for i in range(len(blocks)) if i % 50])
    eval_set = torch.utils.data.Subset(blocks, held_out[:: max(1, len(held_out) // 32)][:32])

    # 2. A small Llama, randomly initialised (seeded, so runs are comparable across devices).
    set_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    print(f"model: Llama, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
          f"{config.num_hidden_layers} layers, hidden {config.hidden_size}")

    # 3. Trainer. No device is named: TrainingArguments finds neuron:0 itself; use_cpu selects the CPU device.
    # Nothing is checkpointed (save_strategy="no"); Trainer's own output_dir is a scratch dir removed after.
    scratch_dir = tempfile.mkdtemp(prefix="hf_finetune_demo_trainer_")
    training_args = TrainingArguments(
        output_dir=scratch_dir, max_steps=args.steps, per_device_train_batch_size=args.batch,
        per_device_eval_batch_size=args.batch, learning_rate=args.lr, lr_scheduler_type="cosine",
        warmup_steps=0.05, weight_decay=0.1, max_grad_norm=1.0, logging_steps=max(1, args.steps // 15),
        logging_first_step=True, save_strategy="no", report_to="none", bf16=args.bf16,
        use_cpu=args.device == "cpu", dataloader_num_workers=0, seed=0)
    print(f"TrainingArguments picked device {training_args.device}")
    trainer = Trainer(model=model, args=training_args, train_dataset=train_set, eval_dataset=eval_set,
                      data_collator=default_data_collator)
    # Trainer moved the model with Module.to(); on a PrivateUse1 device that used to replace every Parameter
    # and silently untie lm_head from embed_tokens (two matrices trained, two saved). Keep it checked.
    if model.lm_head.weight is not model.model.embed_tokens.weight:
        sys.exit("FAIL: moving the model to the device untied lm_head from embed_tokens")
    eval_before = trainer.evaluate()["eval_loss"]
    start = time.perf_counter()
    result = trainer.train()
    timings["training"] = time.perf_counter() - start
    eval_after = trainer.evaluate()["eval_loss"]
    shutil.rmtree(scratch_dir, ignore_errors=True)
    train_tokens = args.steps * args.batch * args.block
    logged = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]

    # 4. Save, then reload the way a user would, on the device by name.
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    # With bf16, accelerate wraps model.forward in an autocast closure that refers back to the model: a
    # reference cycle, so only the garbage collector frees the trained copy from device memory.
    del trainer, model
    gc.collect()
    model = AutoModelForCausalLM.from_pretrained(output_dir, device_map=args.device)
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    print(f"reloaded {type(model).__name__} from {output_dir} on {model.device}")

    # 5. Generation with a StaticCache. disable_compile=True: a static cache makes generate() torch.compile
    # the forward by itself, and torch.compile on neuron is tracked in its own issue.
    inputs = tokenizer(PROMPTS, return_tensors="pt", padding=True).to(model.device)
    with torch.inference_mode():  # warm-up, so that the timing below is of steady-state decoding
        model.generate(**inputs, max_new_tokens=2, cache_implementation="static", disable_compile=True)
    start = time.perf_counter()
    with torch.inference_mode():
        greedy = model.generate(**inputs, do_sample=False, max_new_tokens=40, cache_implementation="static",
                                disable_compile=True)
    gen_seconds = timings[f"generation (greedy, batch {len(PROMPTS)})"] = time.perf_counter() - start
    gen_tokens = (greedy.shape[1] - inputs["input_ids"].shape[1]) * len(PROMPTS)
    set_seed(1234)  # seeds the neuron generator too: the sampled text is reproducible
    sample_in = tokenizer(PROMPTS[0], return_tensors="pt").to(model.device)
    with torch.inference_mode():
        sampled = model.generate(**sample_in, do_sample=True, temperature=0.8, top_k=50, max_new_tokens=40,
                                 cache_implementation="static", disable_compile=True)

    # 6. Report.
    print("\n=== generations (greedy, StaticCache) ===")
    new = greedy[:, inputs["input_ids"].shape[1]:]
    for prompt, text in zip(PROMPTS, tokenizer.batch_decode(new, skip_special_tokens=True)):
        print(f"  {prompt!r} -> {text!r}")
    text = tokenizer.decode(sampled[0, sample_in["input_ids"].shape[1]:], skip_special_tokens=True)
    print(f"  sampled (seed 1234, T=0.8, top-k 50): {PROMPTS[0]!r} -> {text!r}")

    print(f"\n=== loss curve ({len(logged)} points, every {training_args.logging_steps} steps) ===")
    print(f"  {sparkline([loss for _, loss in logged])}")
    for row in range(0, len(logged), 4):
        print("  " + "   ".join(f"step {s:4d}: {loss:6.3f}" for s, loss in logged[row:row + 4]))
    first, last = logged[0][1], logged[-1][1]
    print(f"  first {first:.3f} (uniform guess: ln {len(tokenizer)} = {math.log(len(tokenizer)):.3f}), "
          f"last {last:.3f}; held-out loss {eval_before:.3f} -> {eval_after:.3f} "
          f"(perplexity {math.exp(eval_after):.1f})")

    print("\n=== throughput ===")
    for name, seconds in timings.items():
        print(f"  {name:32s} {seconds:7.2f} s")
    print(f"  training:   {train_tokens / timings['training']:8.0f} tokens/s "
          f"({args.steps} steps x {args.batch} x {args.block} tokens, {'bf16' if args.bf16 else 'fp32'})")
    print(f"  generation: {gen_tokens / gen_seconds:8.0f} tokens/s ({gen_tokens} new tokens, greedy)")

    print(f"\n=== memory ({args.device}) ===")
    memory_report(args.device)
    print("\n=== fallback report (ops a real NeuronCore would run on the host) ===")
    if args.device == "neuron":
        print(f"  {torch_neuronx.fallback_report() or 'none: every op ran on the device'}")
    else:
        print("  not applicable on the CPU device")

    # 7. The check: a model that learned nothing stays near ln(vocab).
    learned = math.isfinite(last) and last < 0.75 * first and eval_after < eval_before - 1.0
    print(f"\n{'PASS' if learned else 'FAIL'}: loss {first:.3f} -> {last:.3f} on {args.device} "
          f"in {result.metrics['train_runtime']:.1f} s")
    return 0 if learned else 1


if __name__ == "__main__":
    sys.exit(main())
