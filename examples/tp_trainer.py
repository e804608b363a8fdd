"""Tensor-parallel training with transformers' Trainer on 2 neuron ranks (docs/scale-out.md).

    ./dev python3 examples/tp_trainer.py [--out FOLDER] [--max-grad-norm 0]

Saves a small Llama, then trains it on 2 ranks, each holding half of every attention and MLP weight
(`from_pretrained(tp_plan="auto")`), and on the CPU device as one process, on the same batches. Prints
one JSON line: each run's losses, and whether the weights every rank holds whole (norms, embeddings,
the head) ended equal on both ranks.

transformers 5.12 shards TP weights as plain local tensors, so Trainer's gradient clipping computes
each rank's own norm (the true norm covers both halves of the sharded weights): with clipping on, the
ranks scale their replicated weights' gradients differently and those weights drift apart. Training
with `max_grad_norm=0` (the default here) keeps the ranks identical and the losses equal to one device.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile

import torch
import torch.multiprocessing as mp

WORLD = 2
STEPS = 4


def dataset() -> list[dict]:
    """Arithmetic sequences mod 256 (next token = previous + 3): a pattern a few steps start to learn."""
    rows = []
    for i in range(8):
        ids = (7 * i + 3 * torch.arange(16)) % 256
        rows.append({"input_ids": ids, "labels": ids.clone()})
    return rows


def training_args(output_dir: str, max_grad_norm: float, **kwargs):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=output_dir, per_device_train_batch_size=4, max_steps=STEPS,
                             learning_rate=3e-3, max_grad_norm=max_grad_norm, train_sampling_strategy="sequential",
                             logging_steps=1, save_strategy="no", report_to="none", seed=0, dataloader_num_workers=0,
                             disable_tqdm=True, **kwargs)


def losses(trainer) -> list[float]:
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def rank_main(rank: int, port: int, path: str, out: str, max_grad_norm: float) -> None:
    # What a launcher such as torchrun sets; USE_LIBUV=0 because Debian's torch is built without libuv.
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), USE_LIBUV="0")
    import torch.distributed as dist
    from transformers import LlamaForCausalLM, Trainer

    torch.neuron.set_device(rank)
    dist.init_process_group("neuron")
    model = LlamaForCausalLM.from_pretrained(path, tp_plan="auto")
    trainer = Trainer(model=model, args=training_args(os.path.join(out, f"rank{rank}"), max_grad_norm),
                      train_dataset=dataset())
    trainer.train()
    # Weights every rank holds whole must stay equal on both ranks.
    replicated = torch.cat([model.model.norm.weight.detach().reshape(-1),
                            model.model.layers[0].input_layernorm.weight.detach().reshape(-1),
                            model.model.embed_tokens.weight.detach().reshape(-1)])
    gathered = [torch.empty_like(replicated) for _ in range(WORLD)]
    dist.all_gather(gathered, replicated)
    result = {"losses": losses(trainer), "tp_size": model.tp_size,
              "replicated_equal": all(torch.equal(gathered[0], g) for g in gathered[1:]),
              "replicated_max_difference": max((gathered[0] - g).abs().max().item() for g in gathered[1:])}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--max-grad-norm", type=float, default=0.0)
    args = parser.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="tp_trainer_")
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    path = os.path.join(out, "llama")
    LlamaForCausalLM(config).save_pretrained(path)
    mp.start_processes(rank_main, args=(free_port(), path, out, args.max_grad_norm), nprocs=WORLD,
                       start_method="spawn")
    reference = Trainer(model=LlamaForCausalLM.from_pretrained(path),
                        args=training_args(os.path.join(out, "cpu"), args.max_grad_norm, use_cpu=True),
                        train_dataset=dataset())
    reference.train()
    ranks = []
    for rank in range(WORLD):
        with open(os.path.join(out, f"rank{rank}.json")) as f:
            ranks.append(json.load(f))
    print(json.dumps({"cpu_losses": losses(reference), "ranks": ranks}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
