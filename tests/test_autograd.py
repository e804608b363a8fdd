"""Autograd on neuron against the same computation on the CPU."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

TOL = dict(rtol=1e-4, atol=1e-5)


def _grads_close(dev_model, cpu_model, **tol):
    for (name, pd), (_, pc) in zip(dev_model.named_parameters(), cpu_model.named_parameters()):
        assert pd.grad is not None, f"{name} has no gradient"
        assert pd.grad.device.type == "neuron", name
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, msg=name, **(tol or TOL))


def test_mlp_backward_matches_cpu():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(16, 12)
    y = torch.randint(0, 5, (16,))
    loss_c = F.cross_entropy(cpu(x), y)
    loss_d = F.cross_entropy(dev(x.to("neuron")), y.to("neuron"))
    torch.testing.assert_close(loss_d.cpu(), loss_c, **TOL)
    loss_c.backward()
    loss_d.backward()
    _grads_close(dev, cpu)
    # one optimizer step keeps parameters equal too
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-2)
    opt_c.step()
    opt_d.step()
    for pd, pc in zip(dev.parameters(), cpu.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), **TOL)


def test_transformer_layer_backward_matches_cpu():
    torch.manual_seed(1)
    cpu = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(2, 7, 32)
    mask = nn.Transformer.generate_square_subsequent_mask(7)
    out_c = cpu(x, src_mask=mask, is_causal=True)
    out_d = dev(x.to("neuron"), src_mask=mask.to("neuron"), is_causal=True)
    torch.testing.assert_close(out_d.cpu(), out_c, **TOL)
    out_c.square().mean().backward()
    out_d.square().mean().backward()
    _grads_close(dev, cpu, rtol=1e-4, atol=1e-4)


def test_grad_through_views():
    base_c = torch.randn(4, 6, requires_grad=True)
    base_d = base_c.detach().to("neuron").requires_grad_()

    def f(b):
        v = b.view(6, 4).t()[1:3]            # view chain
        w = b.narrow(1, 2, 3).unsqueeze(0)  # another view of the same base
        return (v.sin() * 2).sum() + (w.expand(5, 4, 3) ** 2).sum() + b.diagonal().exp().sum()

    f(base_c).backward()
    f(base_d).backward()
    torch.testing.assert_close(base_d.grad.cpu(), base_c.grad, **TOL)


def test_grad_of_in_place_on_view():
    leaf_c = torch.randn(3, 4, requires_grad=True)
    leaf_d = leaf_c.detach().to("neuron").requires_grad_()

    def f(leaf):
        y = leaf * 1.5
        y[:, 1].mul_(2.0)       # in-place on a view of a non-leaf
        y.t()[0].add_(3.0)      # through a view of a view
        y[1:, 2:].exp_()
        return (y ** 2).sum()

    f(leaf_c).backward()
    f(leaf_d).backward()
    torch.testing.assert_close(leaf_d.grad.cpu(), leaf_c.grad, **TOL)


def test_autograd_grad_and_higher_order():
    x_c = torch.randn(5, requires_grad=True)
    x_d = x_c.detach().to("neuron").requires_grad_()
    for x in (x_c, x_d):
        y = (x ** 3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        x.g, x.h = g, h
    torch.testing.assert_close(x_d.g.detach().cpu(), 3 * x_c.detach() ** 2, **TOL)
    torch.testing.assert_close(x_d.h.cpu(), 6 * x_c.detach(), **TOL)
    assert x_d.grad is None  # autograd.grad does not accumulate


def test_retain_graph():
    x = torch.randn(4, device="neuron", requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    y.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    expected = (x.detach().exp() * (x.detach() + 1)).cpu()
    torch.testing.assert_close(first.cpu(), expected, **TOL)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


class _Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.l1 = nn.Linear(16, 32)
        self.l2 = nn.Linear(32, 16)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.l2(self.drop(F.gelu(self.l1(x))))


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_matches_plain_backward(use_reentrant):
    torch.manual_seed(3)
    model = _Block(p=0.0).to("neuron")
    x = torch.randn(8, 16, device="neuron", requires_grad=True)
    model(x).pow(2).sum().backward()
    plain = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    checkpoint(model, x, use_reentrant=use_reentrant).pow(2).sum().backward()
    ckpt = [p.grad for p in model.parameters()] + [x.grad]
    for a, b in zip(ckpt, plain):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_preserves_rng_state_with_dropout(use_reentrant):
    torch.manual_seed(4)
    model = _Block(p=0.5).to("neuron")
    x = torch.randn(8, 16, device="neuron", requires_grad=True)

    torch.manual_seed(123)
    model(x).pow(2).sum().backward()
    plain = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None

    torch.manual_seed(123)
    out = checkpoint(model, x, use_reentrant=use_reentrant, preserve_rng_state=True)
    # draw more random numbers before backward: the recomputation must not see them
    torch.rand(1000, device="neuron")
    out.pow(2).sum().backward()
    ckpt = [p.grad for p in model.parameters()] + [x.grad]
    for a, b in zip(ckpt, plain):
        torch.testing.assert_close(a, b)
    # and dropout really was active (the gradient differs from a p=0 model's)
    model.drop.p = 0.0
    model.zero_grad()
    x.grad = None
    model(x).pow(2).sum().backward()
    assert not torch.allclose(model.l1.weight.grad, plain[0])


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "Adagrad"])
def test_optimizer_implementations_step_as_on_cpu(name, implementation):
    """torch.optim's fused and foreach implementations accept neuron (its fused-device list names the
    PrivateUse1 backend) and take the CPU device's steps, for fp32 parameters and a bf16 one."""
    kwargs = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1)
    kwargs[implementation] = True
    steps = {}
    for device in ("cpu", "neuron"):
        g = torch.Generator().manual_seed(7)
        params = [nn.Parameter(torch.randn(5, 3, generator=g).to(device)),
                  nn.Parameter(torch.randn(4, generator=g).to(device)),
                  nn.Parameter(torch.randn(6, generator=g).to(torch.bfloat16).to(device))]
        initial = params[0].detach().cpu().clone()
        optimizer = getattr(torch.optim, name)(params, **kwargs)
        for step in range(3):
            for p in params:
                p.grad = (torch.randn(p.shape, generator=g) * (step + 1)).to(p.dtype).to(device)
            optimizer.step()
        steps[device] = [p.detach().cpu() for p in params]
        assert all(p.device.type == device for p in params)
        assert not torch.equal(steps[device][0], initial)  # the steps moved the parameters
    for on_neuron, on_cpu in zip(steps["neuron"], steps["cpu"]):
        torch.testing.assert_close(on_neuron, on_cpu, rtol=1e-5, atol=1e-6)
