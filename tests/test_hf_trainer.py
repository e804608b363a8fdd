"""transformers Trainer on neuron with unchanged user code.

Nothing device-related is set: TrainingArguments picks neuron:0 by itself (its _setup_devices has a
neuron branch), the default optimizer is adamw_torch_fused. The reference is the same run with
use_cpu=True.
"""
from __future__ import annotations

import os
import shutil

import pytest
import torch

from conftest import requires_default_topology
from hf_helpers import NEURON0, ProgressionDataset, VariableLengthDataset, clean_accelerate_state, llama_config, \
    make_tokenizer, tiny_llama

pytestmark = [requires_default_topology, pytest.mark.usefixtures("clean_accelerate_state")]
assert clean_accelerate_state  # imported for pytest

STEPS = 8


def _args(out_dir, **kw):
    from transformers import TrainingArguments

    base = dict(output_dir=str(out_dir), per_device_train_batch_size=4, per_device_eval_batch_size=4,
                max_steps=STEPS, logging_steps=1, learning_rate=5e-3, report_to="none", save_strategy="no",
                seed=0, disable_tqdm=True, dataloader_num_workers=0)
    base.update(kw)
    return TrainingArguments(**base)


def _train(out_dir, model=None, train_dataset=None, resume=None, callbacks=None, **kw):
    from transformers import Trainer

    model = model if model is not None else tiny_llama(seed=0)
    trainer = Trainer(model=model, args=_args(out_dir, **kw),
                      train_dataset=train_dataset or ProgressionDataset(64, 32, seed=0),
                      eval_dataset=ProgressionDataset(8, 32, seed=1), callbacks=callbacks)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def _history(trainer, key):
    return [(h["step"], h[key]) for h in trainer.state.log_history if key in h]


def _assert_curves_close(got, ref, key, rtol):
    g, r = _history(got, key), _history(ref, key)
    assert [s for s, _ in g] == [s for s, _ in r] and g, (g, r)
    torch.testing.assert_close(torch.tensor([v for _, v in g], dtype=torch.float64),
                               torch.tensor([v for _, v in r], dtype=torch.float64), rtol=rtol, atol=0)


def test_training_arguments_choose_neuron_by_themselves(tmp_path):
    from transformers import Trainer

    # nothing in the environment steers the device: the choice is the library's own
    assert not os.environ.get("ACCELERATE_TORCH_DEVICE") and not os.environ.get("ACCELERATE_USE_CPU")
    args = _args(tmp_path)
    assert args.device.type == "neuron" and args.device == NEURON0
    assert args.n_gpu == 1
    assert args.optim == "adamw_torch_fused"
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=ProgressionDataset(8, 16))
    assert trainer.model.device == NEURON0
    assert trainer.accelerator.device.type == "neuron"


@pytest.mark.parametrize("variant", ["plain", "accum2_checkpointing_cosine_eval"])
def test_fp32_loss_curve_matches_cpu(tmp_path, variant):
    kw = {}
    if variant != "plain":
        kw = dict(gradient_accumulation_steps=2, gradient_checkpointing=True, lr_scheduler_type="cosine",
                  warmup_steps=2, eval_strategy="steps", eval_steps=4)
    ref = _train(tmp_path / "cpu", use_cpu=True, **kw)
    got = _train(tmp_path / "neuron", **kw)

    assert ref.args.device.type == "cpu" and got.args.device == NEURON0
    assert next(got.model.parameters()).device == NEURON0
    # the default optimizer is the fused AdamW, running on the core's parameters
    assert isinstance(got.optimizer.optimizer, torch.optim.AdamW) and got.optimizer.optimizer.defaults["fused"]
    state = got.optimizer.optimizer.state[next(got.model.parameters())]
    assert state["exp_avg"].device == NEURON0

    _assert_curves_close(got, ref, "loss", rtol=1e-3)
    _assert_curves_close(got, ref, "learning_rate", rtol=1e-6)
    losses = [v for _, v in _history(got, "loss")]
    assert losses[-1] < losses[0] - 0.1, losses  # it learns something
    if variant != "plain":
        assert got.model.is_gradient_checkpointing
        assert got.args.gradient_accumulation_steps == 2
        lrs = [v for _, v in _history(got, "learning_rate")]
        assert lrs[0] < lrs[1] and lrs[-1] < max(lrs)  # warmup then cosine decay
        assert [s for s, _ in _history(got, "eval_loss")] == [4, 8]
        _assert_curves_close(got, ref, "eval_loss", rtol=1e-3)
        metrics = got.evaluate()
        assert "eval_loss" in metrics and torch.isfinite(torch.tensor(metrics["eval_loss"]))


def test_tied_embeddings_stay_tied_and_match_cpu(tmp_path):
    """A model with tie_word_embeddings=True, handed to Trainer on CPU (Trainer moves it to the device).

    Plugin bug: nn.Module.to("neuron") cannot swap .data between a CPU and a neuron tensor
    (torch._has_compatible_shallow_copy_type(cpu, neuron) is False; torch documents that a PrivateUse1
    backend must register its own `_has_compatible_shallow_copy_type`, as OpenReg does), so Module._apply
    builds new Parameter objects: lm_head.weight and embed_tokens.weight come out as two separate tensors
    and train apart from each other.
    """
    ref = _train(tmp_path / "cpu", model=tiny_llama(seed=0, tie_word_embeddings=True), use_cpu=True)
    got = _train(tmp_path / "neuron", model=tiny_llama(seed=0, tie_word_embeddings=True))
    _assert_curves_close(got, ref, "loss", rtol=1e-3)
    tied = got.model.lm_head.weight is got.model.model.embed_tokens.weight
    assert tied, "moving the model to neuron untied lm_head.weight from embed_tokens.weight"


def test_bf16_matches_cpu_bf16(tmp_path):
    ref = _train(tmp_path / "cpu", use_cpu=True, bf16=True)

    proj_dtypes = []
    model = tiny_llama(seed=0)
    model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: proj_dtypes.append(o.dtype))
    got = _train(tmp_path / "neuron", model=model, bf16=True)

    assert got.args.device == NEURON0
    assert proj_dtypes and set(proj_dtypes) == {torch.bfloat16}  # autocast("neuron", bf16) is active
    assert next(got.model.parameters()).dtype == torch.float32  # master weights stay fp32
    _assert_curves_close(got, ref, "loss", rtol=2e-2)
    losses = [v for _, v in _history(got, "loss")]
    assert losses[-1] < losses[0] - 0.1, losses


def test_resume_from_checkpoint_reproduces_losses(tmp_path):
    """Stopping at step 4 and resuming gives the uninterrupted run's losses for steps 5..8.

    The model (Llama, attention_dropout=0, no dropout layers) uses no device randomness: Trainer 5.12's
    _save_rng_state saves python/numpy/cpu and cuda/xla/npu/hpu/mlu/musa generator states but no neuron
    RNG state, so a model with dropout would not resume bit-exactly on neuron without
    NeuronRngStateCallback (next test). (accelerate's save_state does save it; see test_hf_accelerate.)
    """
    full = _train(tmp_path / "run", save_strategy="steps", save_steps=4)
    ckpt = tmp_path / "run" / "checkpoint-4"
    assert (ckpt / "optimizer.pt").exists() and (ckpt / "scheduler.pt").exists()

    rng = torch.load(ckpt / "rng_state.pth", weights_only=False)
    assert "neuron" not in rng and "cpu" in rng  # the Trainer limitation described above

    resumed = _train(tmp_path / "resumed", model=tiny_llama(seed=1), resume=str(ckpt))
    full_tail = [(s, v) for s, v in _history(full, "loss") if s > 4]
    # the resumed state carries the checkpoint's log history for steps 1..4; steps 5..8 are new
    assert _history(resumed, "loss")[:4] == _history(full, "loss")[:4]
    resumed_tail = [(s, v) for s, v in _history(resumed, "loss") if s > 4]
    assert [s for s, _ in resumed_tail] == [5, 6, 7, 8]
    assert [s for s, _ in full_tail] == [5, 6, 7, 8]
    torch.testing.assert_close(torch.tensor([v for _, v in resumed_tail]), torch.tensor([v for _, v in full_tail]),
                               rtol=1e-6, atol=0)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6, msg=name)


def test_resume_with_dropout_reproduces_losses_with_the_neuron_rng_callback(tmp_path):
    """With dropout, resuming repeats the uninterrupted run only if the neuron generator comes back too:
    torch_neuronx.trainer.NeuronRngStateCallback saves it in each checkpoint and restores it on resume.
    Without the callback the resumed losses differ (what Trainer alone gives), which shows the test can fail."""
    from torch_neuronx.trainer import NeuronRngStateCallback

    def dropout_llama():
        return tiny_llama(seed=0, attention_dropout=0.3)

    def callbacks():
        return [NeuronRngStateCallback()]

    def tail(trainer):
        return [v for s, v in _history(trainer, "loss") if s > 4]

    full = _train(tmp_path / "run", model=dropout_llama(), callbacks=callbacks(), save_strategy="steps",
                  save_steps=4)
    ckpt = tmp_path / "run" / "checkpoint-4"
    assert (ckpt / "neuron_rng_state_0.pth").exists()
    assert torch.neuron.initial_seed() == 0  # Trainer seeded the device generator (args.seed)

    # resume_from_checkpoint=True: Trainer and the callback both find the last checkpoint under output_dir
    shutil.copytree(ckpt, tmp_path / "again" / "checkpoint-4")
    resumed = _train(tmp_path / "again", model=dropout_llama(), callbacks=callbacks(), resume=True)
    assert len(tail(resumed)) == 4
    torch.testing.assert_close(torch.tensor(tail(resumed)), torch.tensor(tail(full)), rtol=1e-6, atol=0)

    # an explicit checkpoint in another run's directory, named in TrainingArguments too
    elsewhere = _train(tmp_path / "elsewhere", model=dropout_llama(), callbacks=callbacks(), resume=str(ckpt),
                       resume_from_checkpoint=str(ckpt))
    torch.testing.assert_close(torch.tensor(tail(elsewhere)), torch.tensor(tail(full)), rtol=1e-6, atol=0)

    without = _train(tmp_path / "without", model=dropout_llama(), resume=str(ckpt))
    assert tail(without) != tail(full), "dropout drew the same masks without the neuron RNG state"


def _shape_recorder(model):
    shapes = []

    def pre_hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        assert ids.device == NEURON0
        shapes.append(tuple(ids.shape))

    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    return shapes


@pytest.mark.parametrize("collator", ["DataCollatorForLanguageModeling", "DataCollatorWithPadding"])
def test_pad_to_multiple_of_128_gives_few_static_shapes(tmp_path, collator):
    """Variable-length samples (20..300 tokens) reach the model only as multiples of 128 tokens."""
    from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding, LlamaForSequenceClassification, \
        Trainer

    tok = make_tokenizer()
    texts = VariableLengthDataset(48, 20, 300, seed=3)
    data = texts
    if collator == "DataCollatorForLanguageModeling":
        model = tiny_llama(seed=0, max_position_embeddings=512)
        collate = DataCollatorForLanguageModeling(tok, mlm=False, pad_to_multiple_of=128)
    else:  # classification: DataCollatorWithPadding pads input_ids/attention_mask, labels are per sample
        torch.manual_seed(0)
        model = LlamaForSequenceClassification(llama_config(max_position_embeddings=512, num_labels=2))

        class Labelled(torch.utils.data.Dataset):
            def __len__(self):
                return len(texts)

            def __getitem__(self, i):
                return {**texts[i], "labels": len(texts[i]["input_ids"]) % 2}

        data = Labelled()
        collate = DataCollatorWithPadding(tok, pad_to_multiple_of=128)

    shapes = _shape_recorder(model)
    trainer = Trainer(model=model, args=_args(tmp_path, max_steps=10), train_dataset=data, data_collator=collate)
    trainer.train()

    assert len(shapes) == 10
    seq_lens = {s[1] for s in shapes}
    assert all(n % 128 == 0 for n in seq_lens), shapes
    assert seq_lens <= {128, 256, 384} and len(seq_lens) >= 2, shapes  # padded, yet genuinely variable input
    assert {s[0] for s in shapes} == {4}
    assert all(torch.isfinite(torch.tensor(v)) for _, v in _history(trainer, "loss"))


def test_packing_into_2048_token_blocks_gives_one_shape(tmp_path):
    """The classic group_texts packing: concatenate documents (eos-separated), cut 2048-token blocks."""
    from transformers import Trainer, default_data_collator

    block = 2048
    docs = VariableLengthDataset(160, 20, 300, seed=4)
    stream = [t for i in range(len(docs)) for t in docs[i]["input_ids"] + [2]]
    n_blocks = len(stream) // block
    assert n_blocks >= 4
    blocks = [{"input_ids": stream[i * block:(i + 1) * block], "labels": stream[i * block:(i + 1) * block]}
              for i in range(n_blocks)]

    model = tiny_llama(seed=0, max_position_embeddings=block)
    shapes = _shape_recorder(model)
    trainer = Trainer(model=model, args=_args(tmp_path, max_steps=2, per_device_train_batch_size=2),
                      train_dataset=blocks, data_collator=default_data_collator)
    trainer.train()
    assert len(shapes) == 2
    assert set(shapes) == {(2, block)}
    assert all(torch.isfinite(torch.tensor(v)) for _, v in _history(trainer, "loss"))


def test_model_compiled_with_the_neuron_backend_trains_like_eager(tmp_path):
    # Trainer(torch_compile_backend="neuron") is refused by accelerate 1.14, whose DynamoBackend enum
    # lists fixed names; compiling the model in place before handing it to Trainer works.
    import torch_neuronx

    torch._dynamo.reset()
    torch_neuronx.reset_compile_report()
    ref = _train(tmp_path / "eager")
    model = tiny_llama(seed=0)
    model.compile(backend="neuron")
    got = _train(tmp_path / "compiled", model=model)
    records = torch_neuronx.compile_records()
    assert records and all(r.source != "eager fallback" for r in records)
    assert any("+grad" in s for r in records for s in r.signature)  # a training graph, not inference only
    _assert_curves_close(got, ref, "loss", rtol=1e-3)
    torch._dynamo.reset()


def test_trainer_torch_compile_true_uses_the_default_backend_and_trains_like_eager(tmp_path):
    # TrainingArguments(torch_compile=True) with no backend named: accelerate compiles with Inductor,
    # which lowers the graphs for neuron (docs/compile.md).
    import torch_neuronx

    torch._dynamo.reset()
    torch_neuronx.reset_compile_report()
    ref = _train(tmp_path / "eager")
    got = _train(tmp_path / "compiled", torch_compile=True)
    assert got.args.torch_compile_backend == "inductor"
    records = torch_neuronx.compile_records()
    assert records and all(r.route == "inductor" for r in records)
    assert any("backward" in r.name for r in records)  # a training graph, not inference only
    _assert_curves_close(got, ref, "loss", rtol=1e-5)
    torch._dynamo.reset()
