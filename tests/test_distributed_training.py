"""Real users of the "neuron" backend on 2 ranks: FSDP2, DTensor/DeviceMesh, transformers TP, accelerate, Trainer.

Before the launch the parent saves a tiny LlamaForCausalLM (fixed seed) with
save_pretrained and trains it with a single-process Trainer on CPU (the
reference for the Trainer DDP check). One launch of 2 ranks
(torch.multiprocessing, as in test_distributed.py; rank r on neuron:r, with
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set as a launcher such
as torchrun would) runs two phases, and each rank records each check's outcome:

1. `init_process_group("neuron", tcp://..., device_id=neuron:r)`: FSDP2
   (`fully_shard`) training against single-process training on CPU, DTensor
   placements against slices of the source tensor, DeviceMesh groups made
   by `split_group` (what a bound device makes DeviceMesh use), and
   transformers' `from_pretrained(tp_plan="auto")` against the same weights
   loaded on CPU.
2. The group is destroyed and accelerate creates its own from those variables
   (env://, USE_LIBUV=0 since Debian's torch has no libuv): gather_object,
   broadcast_object_list, gather, reduce; then Trainer DDP (bf16,
   ddp_find_unused_parameters) against the parent's CPU run.
"""
from __future__ import annotations

import importlib.util
import json
import os
import time
import traceback
from datetime import timedelta

import pytest
import torch

from dist_launch import SHM_DIR, free_port, save_results, shm_segments

WORLD = 2
LAUNCH_TIMEOUT = 150
SKIP = "skip: "  # a recorded outcome that starts with this is a skip, with its reason

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")


# Paths the parent prepared before the launch (see `launch`); set in each rank by `_worker`.
INPUTS: dict = {}
TRAIN_STEPS = 4
PER_DEVICE_BATCH = 2


class Skip(Exception):
    """Raised in a rank when a check cannot run here; the parent reports it as a skip with this reason."""


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise Skip(f"{module} is not installed")


# ---------------------------------------------------------------- FSDP2

def _mlp() -> torch.nn.Module:
    """Transformer-like blocks (pre-norm MLPs) and a head; uneven sizes so shards differ in length."""
    def block():
        return torch.nn.Sequential(torch.nn.LayerNorm(12), torch.nn.Linear(12, 33), torch.nn.GELU(),
                                   torch.nn.Linear(33, 12))
    return torch.nn.Sequential(block(), block(), torch.nn.Linear(12, 5))


def _llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def _saved_llama() -> str:
    if "llama" not in INPUTS:
        raise Skip("transformers is not installed")
    return INPUTS["llama"]


def _train_fsdp(rank, dev, make, blocks, loss_fn, batches, lr, steps=3):
    """Trains a fully_shard-ed copy on this rank's half of each batch and a CPU copy on the whole batch.

    Returns [(name, gathered parameter, reference parameter, initial parameter)].
    """
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard

    torch.manual_seed(0)
    reference = make()
    initial = {n: p.detach().clone() for n, p in reference.named_parameters()}
    model = make()
    model.load_state_dict(reference.state_dict())
    model.to(dev)
    for block in blocks(model):
        fully_shard(block)
    fully_shard(model)
    for name, p in model.named_parameters():  # really sharded: dim 0 split between the ranks
        assert isinstance(p, DTensor) and p.placements == (Shard(0),), (name, type(p))
        chunks = torch.empty(p.shape[0]).chunk(WORLD)  # FSDP2 shards dim 0 as torch.chunk does
        expected_rows = chunks[rank].shape[0] if rank < len(chunks) else 0
        assert p.to_local().shape[0] == expected_rows, (name, p.to_local().shape, p.shape)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=lr)
    for step in range(steps):
        batch = batches[step]
        half = batch[0].shape[0] // WORLD
        shard = slice(rank * half, (rank + 1) * half)
        loss = loss_fn(model, *(b[shard].to(dev) for b in batch))
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = loss_fn(reference, *batch)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
    refs = dict(reference.named_parameters())
    return [(n, p.full_tensor().cpu(), refs[n].detach(), initial[n]) for n, p in model.named_parameters()]


def _assert_trained_alike(results, atol, rtol):
    moved = 0.0
    for name, got, ref, init in results:
        torch.testing.assert_close(got, ref, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
        moved = max(moved, (ref - init).abs().max().item())
    assert moved > 20 * atol, f"training barely moved the parameters ({moved}); the comparison proves nothing"


def check_fsdp2_mlp(rank, dev):
    """fully_shard per block and the root, AdamW: the gathered parameters match CPU training on the full batch."""
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)) for _ in range(3)]

    def loss_fn(model, x, y):
        return torch.nn.functional.mse_loss(model(x), y)

    results = _train_fsdp(rank, dev, _mlp, lambda m: list(m)[:2], loss_fn, batches, lr=1e-2)
    _assert_trained_alike(results, atol=2e-5, rtol=1e-4)


def check_fsdp2_llama(rank, dev):
    """The same with transformers' tiny LlamaForCausalLM (hidden 64, 2 layers, vocab 256), one shard per layer."""
    _require("transformers")
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randint(0, 256, (4, 16), generator=g),) for _ in range(3)]

    def loss_fn(model, ids):
        return model(input_ids=ids, labels=ids).loss

    results = _train_fsdp(rank, dev, _llama, lambda m: m.model.layers, loss_fn, batches, lr=1e-3)
    _assert_trained_alike(results, atol=5e-5, rtol=1e-3)


def _mixed_precision_reference(make, batches, loss_fn, lr, divide):
    """What FSDP2 with bf16 parameters and fp32 gradient reduction computes, in one CPU process.

    Per step, every rank's half of the batch runs forward and backward on a bf16 copy of the fp32 parameters;
    the bf16 gradients are summed in fp32 and divided by `divide`; SGD updates the fp32 parameters (SGD, not
    Adam: Adam's normalised step turns bf16 rounding noise in near-zero gradients into full-size steps).
    """
    import copy

    torch.manual_seed(0)
    reference = make()
    initial = {n: p.detach().clone() for n, p in reference.named_parameters()}
    opt = torch.optim.SGD(reference.parameters(), lr=lr)
    for batch in batches:
        half = batch[0].shape[0] // WORLD
        total = [torch.zeros_like(p) for p in reference.parameters()]
        for r in range(WORLD):
            low = copy.deepcopy(reference).to(torch.bfloat16)
            loss_fn(low, *(b[r * half:(r + 1) * half].to(torch.bfloat16) for b in batch)).backward()
            for acc, p in zip(total, low.parameters()):
                acc.add_(p.grad.float())
        for p, g in zip(reference.parameters(), total):
            p.grad = g / divide
        opt.step()
        opt.zero_grad()
    return reference, initial


def check_fsdp2_mixed_precision(rank, dev):
    """fully_shard with bf16 parameters, fp32 gradient reduction and a gradient divide factor (PREMUL_SUM)."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    g = torch.Generator().manual_seed(7)
    batches = [(torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)) for _ in range(3)]
    divide = 2.0 * WORLD  # not the group size, so FSDP2 reduce-scatters with PREMUL_SUM(1 / divide)

    def loss_fn(model, x, y):
        return torch.nn.functional.mse_loss(model(x).float(), y.float())

    reference, initial = _mixed_precision_reference(_mlp, batches, loss_fn, 1.0, divide)
    torch.manual_seed(0)
    model = _mlp().to(dev)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in list(model)[:2]:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(divide)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    for batch in batches:
        half = batch[0].shape[0] // WORLD
        loss_fn(model, *(b[rank * half:(rank + 1) * half].to(dev) for b in batch)).backward()
        for name, p in model.named_parameters():
            assert p.grad.dtype == torch.float32, (name, p.grad.dtype)  # reduced in fp32, kept in fp32
        opt.step()
        opt.zero_grad()
    refs = dict(reference.named_parameters())
    moved = 0.0
    for name, p in model.named_parameters():
        got = p.full_tensor().cpu()
        assert got.dtype == torch.float32, (name, got.dtype)
        # bf16 keeps 8 bits: parameters near 0.3 round at about 1e-3 in either computation.
        torch.testing.assert_close(got, refs[name].detach(), atol=5e-3, rtol=2e-2, msg=lambda m: f"{name}: {m}")
        moved = max(moved, (refs[name] - initial[name]).abs().max().item())
    assert moved > 0.1, f"training barely moved the parameters ({moved}); the comparison proves nothing"


# ---------------------------------------------------------------- DTensor / DeviceMesh

def _placements():
    from torch.distributed.tensor import Replicate, Shard

    return {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate()": Replicate()}


def _expected_local(source: torch.Tensor, placement, rank: int) -> torch.Tensor:
    """What DTensor's even-chunk sharding gives this rank (torch.chunk semantics, as DTensor documents)."""
    from torch.distributed.tensor import Shard

    if isinstance(placement, Shard):
        return source.chunk(WORLD, dim=placement.dim)[rank]
    return source


def check_dtensor_distribute_redistribute(rank, dev):
    """distribute_tensor from rank 0 and redistribute between Shard(0), Shard(1) and Replicate()."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor

    mesh = init_device_mesh("neuron", (WORLD,))
    assert mesh.get_group() is dist.group.WORLD  # a 1-D mesh over the world reuses the default group
    # Uneven in both dimensions; rank 1 passes other data, so every placement must come from rank 0's.
    source = torch.arange(5 * 7, dtype=torch.float32).view(5, 7) / 3
    mine = source if rank == 0 else torch.full_like(source, -1.0)
    for name, placement in _placements().items():
        d = distribute_tensor(mine.to(dev), mesh, [placement])
        assert d.to_local().device == dev
        assert torch.equal(d.to_local().cpu(), _expected_local(source, placement, rank)), f"local of {name}"
        assert torch.equal(d.full_tensor().cpu(), source), f"full_tensor of {name}"
        for other_name, other in _placements().items():
            r = d.redistribute(mesh, [other])
            assert torch.equal(r.to_local().cpu(), _expected_local(source, other, rank)), f"{name} -> {other_name}"
            assert torch.equal(r.full_tensor().cpu(), source), f"full_tensor {name} -> {other_name}"


def check_dtensor_sharded_matmul(rank, dev):
    """Row- and column-sharded matmuls through DTensor ops match the local product."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (WORLD,))
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(6, 8, generator=g), torch.randn(8, 4, generator=g)
    expected = x @ w
    # Contraction dimension sharded: each rank multiplies its halves, the result is a pending sum.
    out = distribute_tensor(x.to(dev), mesh, [Shard(1)]) @ distribute_tensor(w.to(dev), mesh, [Shard(0)])
    assert out.placements == (Partial(),), out.placements
    torch.testing.assert_close(out.full_tensor().cpu(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.redistribute(mesh, [Shard(0)]).to_local().cpu(), expected.chunk(WORLD)[rank],
                               atol=1e-5, rtol=1e-5)
    # Rows sharded, weight replicated: each rank holds its rows of the product, exactly as computed locally.
    out = distribute_tensor(x.to(dev), mesh, [Shard(0)]) @ distribute_tensor(w.to(dev), mesh, [Replicate()])
    assert out.placements == (Shard(0),), out.placements
    local = (x.chunk(WORLD)[rank].to(dev) @ w.to(dev)).cpu()
    assert torch.equal(out.to_local().cpu(), local)
    torch.testing.assert_close(local, x.chunk(WORLD)[rank] @ w, atol=1e-5, rtol=1e-5)


def check_device_mesh_split(rank, dev):
    """With a bound device DeviceMesh makes each dimension's group with split_group; they work."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from torch_neuronx._C import _NeuronBackend

    assert dist.group.WORLD.bound_device_id == dev
    assert dist.group.WORLD._get_backend(dev).supports_splitting
    # split_group itself (it raises for a backend that cannot split): one group per rank, then one of both.
    for split_ranks, mine in (([[0], [1]], [rank]), ([[0, 1]], [0, 1])):
        group = dist.split_group(split_ranks=split_ranks)
        assert dist.get_process_group_ranks(group) == mine
        assert isinstance(group._get_backend(dev), _NeuronBackend) and group.bound_device_id == dev
        t = torch.full((2,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=group)
        assert torch.equal(t.cpu(), torch.full((2,), float(sum(r + 1 for r in mine)))), (split_ranks, t)
    mesh = init_device_mesh("neuron", (1, WORLD), mesh_dim_names=("dp", "tp"))
    for name, ranks in (("dp", [rank]), ("tp", list(range(WORLD)))):
        group = mesh.get_group(name)
        # A dimension spanning the whole world reuses the default group; the others are split off it.
        assert (group is dist.group.WORLD) == (len(ranks) == WORLD), name
        assert dist.get_process_group_ranks(group) == ranks, (name, dist.get_process_group_ranks(group))
        assert isinstance(group._get_backend(dev), _NeuronBackend)
        t = torch.full((3,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=group)
        assert torch.equal(t.cpu(), torch.full((3,), float(sum(r + 1 for r in ranks)))), (name, t)
    source = torch.arange(4 * 6, dtype=torch.float32).view(4, 6)
    d = distribute_tensor(source.to(dev), mesh, [Replicate(), Shard(1)])
    assert torch.equal(d.to_local().cpu(), source.chunk(WORLD, dim=1)[rank])
    assert torch.equal(d.full_tensor().cpu(), source)
    # new_group with a bound device: ranks outside the group take torch's "no-color split" path.
    solo = dist.new_group(ranks=[1])
    if rank == 1:
        t = torch.ones(2, device=dev)
        dist.all_reduce(t, group=solo)
        assert torch.equal(t.cpu(), torch.ones(2))
    else:
        assert solo == dist.GroupMember.NON_GROUP_MEMBER
    dist.barrier()


# ---------------------------------------------------------------- transformers tensor parallelism

def check_tp_llama(rank, dev):
    """from_pretrained(tp_plan="auto") shards the saved Llama over the ranks; logits and greedy tokens match CPU."""
    path = _saved_llama()
    from transformers import LlamaForCausalLM

    # transformers takes the process group that exists and the device from LOCAL_RANK (as under torchrun).
    model = LlamaForCausalLM.from_pretrained(path, tp_plan="auto")
    assert model.tp_size == WORLD, model.tp_size
    # Really split: each rank holds its rows of the column-parallel and its columns of the row-parallel weights.
    reference = LlamaForCausalLM.from_pretrained(path)
    split = {"self_attn.q_proj": 0, "self_attn.k_proj": 0, "self_attn.o_proj": 1, "mlp.up_proj": 0,
             "mlp.down_proj": 1}  # colwise: rows (dim 0) of the weight; rowwise: columns (dim 1)
    for name, dim in split.items():
        got = model.model.layers[0].get_submodule(name).weight
        full = reference.model.layers[0].get_submodule(name).weight.detach()
        assert got.device == dev, (name, got.device)
        local = (got.to_local() if hasattr(got, "to_local") else got).detach().cpu()
        assert torch.equal(local, full.chunk(WORLD, dim=dim)[rank]), (name, tuple(local.shape))
    assert next(reference.parameters()).device.type == "cpu"
    prompt = torch.tensor([[1, 17, 42, 99, 3, 250, 7, 64, 128, 5]])
    with torch.no_grad():
        logits = model(prompt.to(dev)).logits
        ref_logits = reference(prompt).logits
    assert logits.device == dev
    torch.testing.assert_close(logits.cpu(), ref_logits, atol=1e-5, rtol=1e-4)
    new = 12
    tokens = model.generate(prompt.to(dev), max_new_tokens=new, do_sample=False, pad_token_id=0)
    ref_tokens = reference.generate(prompt, max_new_tokens=new, do_sample=False, pad_token_id=0)
    assert ref_tokens.shape == (1, prompt.shape[1] + new), ref_tokens.shape
    assert torch.equal(tokens.cpu(), ref_tokens), (tokens.cpu().tolist(), ref_tokens.tolist())


# ---------------------------------------------------------------- accelerate

def check_accelerate(rank, dev):
    """accelerate creates the group itself (MULTI_NEURON) and its object and tensor collectives work."""
    _require("accelerate")
    import torch.distributed as dist
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType, broadcast_object_list, gather_object

    from torch_neuronx._C import _NeuronBackend

    accelerator = Accelerator()
    state = PartialState()
    assert state.distributed_type == DistributedType.MULTI_NEURON, state.distributed_type
    assert (state.backend, state.num_processes, state.process_index) == ("neuron", WORLD, rank)
    assert accelerator.device == dev, accelerator.device
    assert isinstance(dist.group.WORLD._get_backend(dev), _NeuronBackend)
    # Objects of different pickled sizes on each rank.
    gathered = gather_object([{"rank": rank, "text": "x" * (1000 * rank)}])
    assert gathered == [{"rank": r, "text": "x" * (1000 * r)} for r in range(WORLD)], gathered
    objects = [f"from {rank}", {"rank": rank}, list(range(rank * 3))]
    broadcast_object_list(objects, from_process=WORLD - 1)
    last = WORLD - 1
    assert objects == [f"from {last}", {"rank": last}, list(range(last * 3))], objects
    t = accelerator.gather(torch.tensor([rank, 10 * rank], device=dev))
    assert t.cpu().tolist() == [v for r in range(WORLD) for v in (r, 10 * r)], t
    s = accelerator.reduce(torch.tensor([rank + 1.0], device=dev), reduction="sum")
    assert s.cpu().tolist() == [float(sum(range(1, WORLD + 1)))], s
    accelerator.wait_for_everyone()


# ---------------------------------------------------------------- Trainer DDP

def _lm_dataset() -> list[dict]:
    """8 arithmetic sequences mod 256 (next token = previous + 3): a pattern a few steps start to learn."""
    rows = []
    for i in range(8):
        ids = (7 * i + 3 * torch.arange(16)) % 256
        rows.append({"input_ids": ids, "labels": ids.clone()})
    return rows


def _trainer_args(output_dir: str, per_device: int, **kwargs):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=output_dir, per_device_train_batch_size=per_device, max_steps=TRAIN_STEPS,
                             learning_rate=3e-3, bf16=True, train_sampling_strategy="sequential", logging_steps=1,
                             save_strategy="no", report_to="none", seed=0, dataloader_num_workers=0,
                             disable_tqdm=True, **kwargs)


def _train_log(trainer) -> dict:
    """The loss and gradient norm Trainer logged at each step (logging_steps=1)."""
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    return {"loss": [e["loss"] for e in steps], "grad_norm": [float(e["grad_norm"]) for e in steps]}


def _train_reference_on_cpu(path: str, out: str, work_dir: str) -> None:
    """The parent's single-process Trainer on CPU with the global batch (WORLD x PER_DEVICE_BATCH)."""
    from accelerate.state import AcceleratorState
    from transformers import LlamaForCausalLM, Trainer

    environ = dict(os.environ)
    try:
        model = LlamaForCausalLM.from_pretrained(path)
        args = _trainer_args(work_dir, WORLD * PER_DEVICE_BATCH, use_cpu=True)
        trainer = Trainer(model=model, args=args, train_dataset=_lm_dataset())
        trainer.train()
        assert args.device.type == "cpu" and trainer.accelerator.num_processes == 1
        torch.save({"params": {n: p.detach().clone() for n, p in model.named_parameters()},
                    "log": _train_log(trainer)}, out)
    finally:  # leave this process as it was
        AcceleratorState._reset_state(reset_partial_state=True)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)


def check_trainer_ddp(rank, dev):
    """Trainer (bf16, ddp_find_unused_parameters) on 2 ranks: identical ranks, falling loss, CPU run's parameters."""
    _require("accelerate")
    path = _saved_llama()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from transformers import LlamaForCausalLM, Trainer
    from transformers.training_args import ParallelMode

    initial = LlamaForCausalLM.from_pretrained(path)
    model = LlamaForCausalLM.from_pretrained(path)
    args = _trainer_args(INPUTS["trainer_dir"], PER_DEVICE_BATCH, ddp_find_unused_parameters=True)
    assert args.parallel_mode == ParallelMode.DISTRIBUTED and args.world_size == WORLD, args.parallel_mode
    assert args.device == dev, args.device
    trainer = Trainer(model=model, args=args, train_dataset=_lm_dataset())
    dtypes = set()  # what the linear layers compute in: bf16 under accelerate's autocast on neuron
    hook = model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: dtypes.add((o.device, o.dtype)))
    trainer.train()
    hook.remove()
    assert dtypes == {(dev, torch.bfloat16)}, dtypes
    wrapped = trainer.model_wrapped
    assert isinstance(wrapped, DistributedDataParallel) and wrapped.find_unused_parameters, type(wrapped)
    assert trainer.accelerator.mixed_precision == "bf16"
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # under accelerate's wrapper
    assert optimizer.defaults.get("fused"), optimizer.defaults  # Trainer's default, adamw_torch_fused, on neuron
    assert trainer.state.global_step == TRAIN_STEPS
    params = dict(model.named_parameters())
    assert all(p.device == dev and p.dtype == torch.float32 for p in params.values())
    # Both ranks hold the same bits.
    flat = torch.cat([p.detach().reshape(-1) for p in params.values()])
    gathered = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], g) for g in gathered[1:]), "ranks ended with different parameters"
    log = _train_log(trainer)
    assert len(log["loss"]) == TRAIN_STEPS and log["loss"][-1] < log["loss"][0], log
    # The parent's single-process CPU Trainer on the same global batches: the same losses and gradient norms
    # (the norm of the averaged gradients, before clipping), up to bf16 rounding.
    reference = torch.load(INPUTS["trainer_reference"])
    torch.testing.assert_close(torch.tensor(log["loss"]), torch.tensor(reference["log"]["loss"]), atol=2e-3, rtol=0)
    torch.testing.assert_close(torch.tensor(log["grad_norm"]), torch.tensor(reference["log"]["grad_norm"]),
                               atol=0, rtol=5e-3)
    # AdamW moves every element by about the learning rate whatever its gradient's size, so the few elements
    # whose gradient is within bf16 rounding of zero may move either way: compare each parameter's update as a
    # whole, and require almost every element to match closely.
    init = dict(initial.named_parameters())
    diffs = []
    for name, p in params.items():
        got, ref, start = p.detach().cpu(), reference["params"][name], init[name].detach()
        update_error = ((got - ref).norm() / (ref - start).norm()).item()
        assert update_error < 0.05, f"{name}: update differs from the CPU run's by {update_error:.1%}"
        diffs.append((got - ref).abs().reshape(-1))
    diffs = torch.cat(diffs)
    close = (diffs <= 1e-4).float().mean().item()
    assert close > 0.98, f"only {close:.2%} of the elements are within 1e-4 of the CPU run's"
    moved = max((reference["params"][n] - init[n].detach()).abs().max().item() for n in params)
    assert moved > 20 * 1e-4, f"training barely moved the parameters ({moved}); the comparison proves nothing"

PHASE1 = [check_fsdp2_mlp, check_fsdp2_llama, check_fsdp2_mixed_precision, check_dtensor_distribute_redistribute, check_dtensor_sharded_matmul,
          check_device_mesh_split, check_tp_llama]
PHASE2 = [check_accelerate, check_trainer_ddp]


# ---------------------------------------------------------------- the launch

def _record(results: dict, check) -> None:
    start = time.monotonic()
    try:
        check(results["rank"], results["device"])
        results[check.__name__] = "ok"
    except Skip as reason:
        results[check.__name__] = SKIP + str(reason)
    except BaseException:  # noqa: BLE001  recorded for the parent's report
        results[check.__name__] = traceback.format_exc()
    results["seconds"][check.__name__] = round(time.monotonic() - start, 2)


def _worker(rank: int, ports: list[int], out_dir: str, inputs: dict) -> None:
    import torch.distributed as dist

    INPUTS.update(inputs)
    # What a launcher such as torchrun would set: transformers' tensor parallelism takes the device from
    # LOCAL_RANK, and accelerate (phase 2) reads them all.
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(ports[1]), USE_LIBUV="0")
    torch.neuron.set_device(rank)
    dev = torch.device("neuron", rank)
    results = {"rank": rank, "device": dev, "seconds": {}}
    try:
        dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{ports[0]}?use_libuv=0", rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60), device_id=dev)
        for check in PHASE1:
            _record(results, check)
        dist.destroy_process_group()
        for check in PHASE2:
            _record(results, check)
        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        save_results(results, out_dir)


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    import torch.multiprocessing as mp

    out_dir = str(tmp_path_factory.mktemp("ranks"))
    inputs = {"trainer_dir": os.path.join(out_dir, "trainer")}
    if importlib.util.find_spec("transformers") is not None:
        with torch.random.fork_rng(devices=[]):  # leave this process's CPU generator as it was
            torch.manual_seed(0)
            inputs["llama"] = os.path.join(out_dir, "llama")
            _llama().save_pretrained(inputs["llama"])
            if importlib.util.find_spec("accelerate") is not None:
                inputs["trainer_reference"] = os.path.join(out_dir, "trainer_reference.pt")
                _train_reference_on_cpu(inputs["llama"], inputs["trainer_reference"], os.path.join(out_dir, "cpu"))
    before = shm_segments()
    context = mp.start_processes(_worker, args=([free_port(), free_port()], out_dir, inputs), nprocs=WORLD,
                                 join=False, start_method="spawn")
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for p in context.processes:
                p.kill()
            pytest.fail(f"the ranks did not finish within {LAUNCH_TIMEOUT} s")
    results = []
    for rank in range(WORLD):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            results.append(json.load(f))
    return results, before, shm_segments()


@pytest.mark.parametrize("check", [c.__name__ for c in PHASE1 + PHASE2])
def test_training(launch, check):
    results, _, _ = launch
    outcomes = {r["rank"]: r.get(check, "not run") for r in results}
    skips = {o for o in outcomes.values() if o.startswith(SKIP)}
    if skips and len(skips) == len(set(outcomes.values())):
        pytest.skip(skips.pop()[len(SKIP):])
    failures = {rank: text for rank, text in outcomes.items() if text != "ok"}
    assert not failures, "\n".join(f"rank {rank}:\n{text}" for rank, text in failures.items())


def test_no_segment_left_behind(launch):
    """Split groups rendezvous like any other: no shared-memory segment outlives the launch."""
    _, before, after = launch
    assert after <= before, f"new shared-memory segments left in {SHM_DIR}: {sorted(after - before)}"
