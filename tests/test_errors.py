"""Errors are clear Python exceptions, and the device keeps working after them."""
import json
import re

import pytest
import torch

from conftest import DEFAULT_CORES, check_ok, requires_default_topology, requires_two_devices, run_python_many


@pytest.fixture
def survivor():
    """A tensor that must keep its values through every error."""
    t = torch.arange(16, dtype=torch.float32, device="neuron")
    yield t
    assert t.tolist() == [float(i) for i in range(16)]
    assert (t * 2).sum().item() == 240.0
    assert torch.ones(3, device="neuron").sum().item() == 3.0


@requires_default_topology
def test_invalid_device_index(survivor):
    with pytest.raises((IndexError, RuntimeError)) as info:
        torch.empty(2, device="neuron:9")
    msg = str(info.value)
    assert "9" in msg and str(DEFAULT_CORES) in msg, msg
    with pytest.raises((IndexError, RuntimeError)) as info:
        torch.ones(2, device="neuron").to("neuron:9")
    assert "9" in str(info.value)


@requires_default_topology
def test_set_device_out_of_range(survivor):
    with pytest.raises((IndexError, RuntimeError, ValueError)) as info:
        torch.neuron.set_device(9)
    assert "9" in str(info.value)
    assert torch.neuron.current_device() == 0
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        torch.neuron.get_device_properties(9)
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        with torch.neuron.device(9):
            pass
    assert torch.neuron.current_device() == 0


@requires_two_devices
def test_mixing_cores_raises(survivor):
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        a @ b.view(3, 1).expand(3, 3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])
    with pytest.raises(RuntimeError, match="same device"):
        a.add_(b)
    assert a.tolist() == [1.0, 1.0, 1.0] and b.tolist() == [1.0, 1.0, 1.0]
    assert (a + b.to("neuron:0")).tolist() == [2.0, 2.0, 2.0]


def test_indices_on_another_device_raise_atens_message(survivor):
    """Indexing with indices on another device than the tensor: ATen's message, which CUDA gives too and
    PyTorch's own test matches (test_advancedindex_mixed_devices_error); CPU indices into neuron work."""
    x = torch.arange(24.0).reshape(2, 3, 4)
    index = torch.tensor([2, 0])
    for target in (lambda: x[:, index.to("neuron")], lambda: x.index_put_((index.to("neuron"),), torch.tensor(1.0))):
        with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the "
                                               r"indexed tensor \(cpu\)"):
            target()
    assert torch.equal(x, torch.arange(24.0).reshape(2, 3, 4))
    assert torch.equal(x.to("neuron")[:, index].cpu(), x[:, index])
    if torch.neuron.device_count() > 1:
        with pytest.raises(RuntimeError, match=r"indexed tensor \(neuron:0\)"):
            x.to("neuron:0")[:, index.to("neuron:1")]


def test_cpu_and_neuron_mixed_raises(survivor):
    n = torch.ones(3, device="neuron")
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        n + c
    with pytest.raises(RuntimeError, match="same device"):
        c + n
    with pytest.raises(RuntimeError):
        torch.mm(n.view(3, 1), c.view(1, 3))
    with pytest.raises(RuntimeError):
        n.mul_(c)
    assert n.tolist() == [1.0, 1.0, 1.0]
    # a 0-dim CPU tensor acts as a scalar (as on CUDA)
    assert (n + torch.tensor(2.0)).tolist() == [3.0, 3.0, 3.0]


def test_unsupported_layout_raises(survivor):
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.empty(2, 2, device="neuron", layout=torch.sparse_coo)


_INVALID_ENV_PROBE = """
    import json, torch
    out = {"available": torch.neuron.is_available(), "count": torch.neuron.device_count()}
    try:
        torch.ones(2, device="neuron")
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)
        out["type"] = type(e).__name__
    print(json.dumps(out))
"""


def test_invalid_environment_values():
    cases = [
        ({"NEURON_RT_VISIBLE_CORES": "abc"}, "NEURON_RT_VISIBLE_CORES"),
        ({"NEURON_LOGICAL_NC_CONFIG": "3"}, "NEURON_LOGICAL_NC_CONFIG"),
        ({"NEURON_RT_NUM_CORES": "99"}, "NEURON_RT_NUM_CORES"),
    ]
    results = run_python_many([(_INVALID_ENV_PROBE, env) for env, _ in cases], timeout=120)
    for (env, variable), result in zip(cases, results):
        info = json.loads(check_ok(result).strip().splitlines()[-1])
        assert info["available"] is False, env
        assert info["count"] == 0, env
        assert info["error"] is not None, f"{env}: creating a tensor did not raise"
        assert variable in info["error"], (env, info["error"])


@pytest.mark.parametrize("op", [
    lambda a, b, out: torch.add(a, b, out=out),          # an unboxed kernel
    lambda a, b, out: torch.atan2(a, b, out=out),        # the boxed fallback
    lambda a, b, out: torch.mm(a.view(1, 1), b.view(1, 1), out=out.view(1, 1)),
])
def test_a_cpu_out_tensor_is_refused_even_for_scalar_inputs(survivor, op):
    # CPU scalars may be read by a neuron op, never written: CUDA raises here too.
    a, b, out = torch.tensor(1.0, device="neuron"), torch.tensor(2.0, device="neuron"), torch.zeros(())
    with pytest.raises(RuntimeError, match="same device"):
        op(a, b, out)
    assert out.item() == 0.0


@pytest.mark.parametrize("inplace", [
    lambda a, b: a.ldexp_(b),   # composite: mul.out with out=self
    lambda a, b: a.mul_(b),
    lambda a, b: a.add_(b),
    lambda a, b: a.atan2_(b),   # the boxed fallback
])
def test_in_place_broadcast_larger_than_self_raises_as_on_cpu(survivor, inplace):
    for device in ("cpu", "neuron"):
        a, b = torch.ones(3, device=device), torch.ones(2, 3, device=device)
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            inplace(a, b)
        assert a.shape == (3,) and a.tolist() == [1.0, 1.0, 1.0]


SPARSE = "sparse layouts (COO, CSR, CSC, BSR, BSC) are not supported"
STRIDED_ONLY = "neuron supports strided (dense) tensors only"
QUANTIZED = "neuron does not support PyTorch's quantized tensors"


def test_sparse_layouts_are_refused_by_name(survivor):
    dense = torch.tensor([[0.0, 2.0], [3.0, 0.0]])
    coo = dense.to_sparse()
    with pytest.raises(NotImplementedError, match=re.escape(SPARSE)):
        coo.to("neuron")
    with pytest.raises(NotImplementedError, match=re.escape(STRIDED_ONLY)):
        dense.to("neuron").to_sparse()
    with pytest.raises(NotImplementedError, match="sparse layouts"):
        torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.tensor([1.0]), (2, 2), device="neuron")
    # torch moves a CSR tensor's three dense parts without asking the device; what is done with it raises.
    csr = dense.to_sparse_csr().to("neuron")
    for use in (lambda: csr.to_dense(), lambda: csr @ torch.ones(2, 2, device="neuron"), lambda: repr(csr)):
        with pytest.raises(NotImplementedError, match="sparse layouts"):
            use()
    assert torch.equal(coo.to_dense(), dense)  # the CPU originals are untouched


def test_quantized_tensors_are_refused_by_name(survivor):
    x = torch.randn(4, 4)
    with pytest.raises(NotImplementedError, match=QUANTIZED):
        torch.quantize_per_tensor(x.to("neuron"), 0.1, 0, torch.quint8)
    q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match=QUANTIZED):
        q.to("neuron")
    with pytest.raises(NotImplementedError, match=QUANTIZED):
        torch.empty(3, dtype=torch.quint8, device="neuron")
    torch.testing.assert_close(q.dequantize(), x, atol=0.05, rtol=0)
