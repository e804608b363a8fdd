"""Composite kernels that choose their arithmetic by device: on neuron they must take the CPU device's route,
since neuron runs the CPU device's kernels (found by PyTorch's test_binary_ufuncs.py)."""
import torch

N = torch.device("neuron:0")


def test_ldexp_takes_the_exact_route():
    """ldexp's composite kernel calls C's ldexp on devices with an ldexp kernel and elsewhere multiplies by
    pow(2, other) in self's dtype: on neuron float16 ldexp(2^-10, 20) gave inf (1024 exactly) and
    ldexp(-2, -25) gave -0.0, float32 ldexp(2^-10, 130) inf."""
    cases = [(torch.tensor([-2.0, 2.0**-10], dtype=torch.half), torch.tensor([-25, 20])),
             (torch.tensor([2.0**-10, 3.0]), torch.tensor([130, -140], dtype=torch.int32)),
             (torch.tensor([1.5, -0.75], dtype=torch.bfloat16), torch.tensor([100, -120], dtype=torch.int16))]
    for mantissa, exponent in cases:
        expected = torch.ldexp(mantissa, exponent)
        assert torch.isfinite(expected).all() and (expected != 0).all()  # the cases fit the dtype
        got = torch.ldexp(mantissa.to(N), exponent.to(N))
        assert got.device.type == "neuron" and got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
        out = torch.empty_like(mantissa, device=N)
        torch.ldexp(mantissa.to(N), exponent.to(N), out=out)
        torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)
        in_place = mantissa.to(N)
        in_place.ldexp_(exponent.to(N))
        torch.testing.assert_close(in_place.cpu(), expected, rtol=0, atol=0)


def test_ldexp_gradients_against_cpu():
    x = torch.randn(6)
    e = torch.randint(-3, 4, (6,)).float()
    grads = {}
    for device in ("cpu", N):
        xi, ei = (t.to(device).clone().requires_grad_() for t in (x, e))
        torch.ldexp(xi, ei).mul(torch.arange(6.0, device=device)).sum().backward()
        grads[device] = (xi.grad.cpu(), ei.grad.cpu())
    for expected, got in zip(grads["cpu"], grads[N]):
        torch.testing.assert_close(got, expected)
