"""accelerate 1.14 on neuron with unchanged user code (single process)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from conftest import requires_default_topology
from hf_helpers import clean_accelerate_state, reset_accelerate_state

pytestmark = [requires_default_topology, pytest.mark.usefixtures("clean_accelerate_state")]
assert clean_accelerate_state  # imported for pytest


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))


def _loader():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=g)
    y = (x[:, :4].sum(1, keepdim=True) - x[:, 4:8].sum(1, keepdim=True)) / 2
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True,
                                       generator=torch.Generator().manual_seed(1))


def _fit(accelerator, epochs=3, record_dtypes=None, model_on_device_first=False):
    model = _mlp()
    if model_on_device_first:
        model.to(accelerator.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt, dl = accelerator.prepare(model, opt, _loader())
    if record_dtypes is not None:
        model[0].register_forward_hook(lambda m, i, o: record_dtypes.append(o.dtype))
    losses = []
    for _ in range(epochs):
        for x, y in dl:
            assert x.device.type == y.device.type == accelerator.device.type
            with accelerator.autocast():
                loss = torch.nn.functional.mse_loss(model(x).float(), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return model, opt, losses


def test_accelerator_picks_neuron():
    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    acc = Accelerator()
    assert acc.device.type == "neuron"
    assert acc.distributed_type == DistributedType.NO
    assert acc.num_processes == 1 and acc.is_main_process
    model = acc.prepare(_mlp())
    assert {p.device.type for p in model.parameters()} == {"neuron"}


def test_prepare_keeps_optimizer_bound_to_model_parameters():
    """The documented pattern: build model and optimizer on CPU, then prepare(model, optimizer, dataloader).

    Plugin bug: nn.Module.to("neuron") (called by prepare_model) replaces every Parameter object instead of
    swapping its .data, because torch._has_compatible_shallow_copy_type(cpu_tensor, neuron_tensor) is False
    (torch leaves PrivateUse1 out of its dense-backend list and documents that the backend must register
    `_has_compatible_shallow_copy_type` itself, see OpenRegMinimal.cpp). The optimizer keeps the stale CPU
    parameters, which never receive gradients: optimizer.step() silently does nothing.
    Minimal repro: lin = torch.nn.Linear(4, 1); opt = torch.optim.SGD(lin.parameters(), 0.1);
    lin.to("neuron"); lin(torch.randn(8, 4, device="neuron")).sum().backward(); opt.step()  -> lin unchanged.
    """
    from accelerate import Accelerator

    acc = Accelerator()
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt, _ = acc.prepare(model, opt, _loader())
    before = [p.detach().cpu().clone() for p in model.parameters()]
    _train_more(acc, model, opt)
    owned = {id(p) for group in opt.optimizer.param_groups for p in group["params"]}
    assert all(id(p) in owned for p in model.parameters()), "the optimizer does not hold the model's parameters"
    assert all(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))


def test_bf16_autocast_inside_accelerator():
    from accelerate import Accelerator

    acc = Accelerator(mixed_precision="bf16")
    assert acc.mixed_precision == "bf16" and acc.device.type == "neuron"
    model = acc.prepare(_mlp())
    dtypes = []
    model[0].register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    x = torch.randn(4, 16, device=acc.device)
    with acc.autocast():
        out = model(x)
        a = torch.randn(8, 8, device=acc.device)
        assert (a @ a).dtype == torch.bfloat16  # a plain matmul inside accelerator.autocast()
    assert dtypes == [torch.bfloat16]  # the inner Linear ran in bf16
    assert next(model.parameters()).dtype == torch.float32  # master weights stay fp32
    assert (a @ a).dtype == torch.float32  # and autocast ends with the context
    out.float().sum().backward()
    assert next(model.parameters()).grad.dtype == torch.float32


def test_prepare_backward_step_bf16_matches_cpu():
    """The usual accelerate loop with mixed_precision="bf16"; reference: Accelerator(cpu=True, bf16)."""
    from accelerate import Accelerator

    ref_model, _, ref_losses = _fit(Accelerator(cpu=True, mixed_precision="bf16"))
    assert next(ref_model.parameters()).device.type == "cpu"
    assert ref_losses[-1] < 0.5 * ref_losses[0], ref_losses
    reset_accelerate_state()

    dtypes = []
    model, opt, losses = _fit(Accelerator(mixed_precision="bf16"), record_dtypes=dtypes)
    assert next(model.parameters()).device.type == "neuron"
    assert dtypes and set(dtypes) == {torch.bfloat16}
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=2e-2, atol=2e-3)


def test_save_state_load_state_round_trip(tmp_path):
    from accelerate import Accelerator

    acc = Accelerator()
    # model moved before the optimizer is built, so that this test does not depend on the Parameter
    # identity bug of test_prepare_keeps_optimizer_bound_to_model_parameters
    model, opt, _ = _fit(acc, epochs=1, model_on_device_first=True)
    assert opt.optimizer.state, "the optimizer has not stepped"
    torch.neuron.manual_seed(1234)
    torch.randn(7, device="neuron")  # move the generator off its seed position
    acc.save_state(str(tmp_path))

    saved_model = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    saved_opt = {k: v.cpu().clone() for k, v in opt.optimizer.state[next(model.parameters())].items()}
    saved_rng = torch.neuron.get_rng_state()
    expected_draw = torch.randn(16, device="neuron").cpu()

    states = torch.load(tmp_path / "random_states_0.pkl", weights_only=False)
    assert torch.equal(states["torch_neuron_manual_seed"][0], saved_rng)  # accelerate checkpoints neuron RNG

    # disturb everything: one more epoch of training and more draws from the neuron generator
    _train_more(acc, model, opt)
    torch.randn(1000, device="neuron")
    assert not torch.equal(torch.neuron.get_rng_state(), saved_rng)
    assert any(not torch.equal(v.cpu(), saved_model[k]) for k, v in model.state_dict().items())

    acc.load_state(str(tmp_path))
    for k, v in model.state_dict().items():
        assert v.device.type == "neuron"
        assert torch.equal(v.cpu(), saved_model[k]), k
    for k, v in opt.optimizer.state[next(model.parameters())].items():
        assert torch.equal(v.cpu(), saved_opt[k]), k
    assert torch.equal(torch.neuron.get_rng_state(), saved_rng)
    assert torch.equal(torch.randn(16, device="neuron").cpu(), expected_draw)


def _train_more(acc, model, opt):
    x = torch.randn(16, 16, device=acc.device)
    loss = model(x).square().mean()
    acc.backward(loss)
    opt.step()
    opt.zero_grad()


def test_set_seed_seeds_neuron():
    from accelerate.utils import set_seed

    set_seed(7)
    a = torch.randn(32, device="neuron").cpu()
    set_seed(7)
    assert torch.equal(torch.randn(32, device="neuron").cpu(), a)


def test_gather_reduce_gather_object_single_process():
    from accelerate import Accelerator
    from accelerate.utils import gather, gather_object, reduce

    acc = Accelerator()
    t = torch.arange(6, dtype=torch.float32, device=acc.device).reshape(2, 3)
    g = gather(t)
    assert g.device.type == "neuron" and torch.equal(g.cpu(), t.cpu())
    assert torch.equal(acc.gather(t).cpu(), t.cpu())
    assert torch.equal(acc.gather_for_metrics(t).cpu(), t.cpu())
    for op in ("sum", "mean"):
        r = reduce(t, op)
        assert r.device.type == "neuron" and torch.equal(r.cpu(), t.cpu())
    assert torch.equal(acc.reduce(t, "sum").cpu(), t.cpu())
    objs = [{"a": 1}, "two", (3,)]
    assert gather_object(objs) == objs
    assert acc.pad_across_processes(t, dim=1).shape == t.shape


def test_accelerate_env_reports_neuron():
    out = subprocess.run([sys.executable, "-m", "accelerate.commands.accelerate_cli", "env"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "PyTorch accelerator: NEURON" in out.stdout, out.stdout
    assert f"NEURON type: {torch.neuron.get_device_name(0)}" in out.stdout, out.stdout


def test_fp16_mixed_precision_is_refused_by_accelerate():
    """accelerate 1.14 refuses fp16 on neuron (accelerator.py: fp16 needs cuda/xpu/npu/xla/mlu/musa/hpu/sdaa/mps).

    This pins the README statement that only bf16 mixed precision is available through accelerate/Trainer.
    bf16 works (tested above).
    """
    from accelerate import Accelerator

    with pytest.raises(ValueError, match="fp16 mixed precision requires a device in .*not 'neuron'"):
        Accelerator(mixed_precision="fp16")
