"""torch.nn layers whose ATen code takes accelerator-only paths (fused recurrent cells, the
transformer encoder's nested-tensor fast path), and nested tensors (in inference and under autograd), against
the CPU device."""
import copy
import warnings

import pytest
import torch

N = torch.device("neuron:0")


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
@pytest.mark.parametrize("layers, bidirectional, bias", [(1, False, True), (2, True, True), (1, False, False)])
def test_recurrent_layers_against_cpu(cls, layers, bidirectional, bias):
    """LSTM and GRU: ATen sends accelerator inputs to the fused cell ops, which the CPU device never uses
    (both layers raised NotImplementedError on neuron). Outputs, states and gradients against CPU's."""
    torch.manual_seed(layers)
    cpu = cls(6, 5, num_layers=layers, bidirectional=bidirectional, bias=bias, batch_first=True)
    dev = copy.deepcopy(cpu).to(N)
    x = torch.randn(3, 7, 6)
    outputs = {}
    for name, module, device in (("cpu", cpu, "cpu"), ("neuron", dev, N)):
        inp = x.to(device).detach().requires_grad_()
        out, state = module(inp)
        states = state if isinstance(state, tuple) else (state,)
        (out.square().sum() + sum(s.sum() for s in states)).backward()
        outputs[name] = [out, *states, inp.grad] + [p.grad for p in module.parameters()]
    for c, n in zip(outputs["cpu"], outputs["neuron"]):
        assert n.device.type == "neuron"
        torch.testing.assert_close(n.cpu(), c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_recurrent_layers_in_inference_mode_and_on_packed_sequences(cls):
    torch.manual_seed(3)
    cpu = cls(4, 3)
    dev = copy.deepcopy(cpu).to(N)
    x = torch.randn(5, 2, 4)
    with torch.inference_mode():
        expected, _ = cpu(x)
        got, _ = dev(x.to(N))
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]))
    expected, _ = torch.nn.utils.rnn.pad_packed_sequence(cpu(packed)[0])
    got, _ = torch.nn.utils.rnn.pad_packed_sequence(dev(packed.to(N))[0])
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_transformer_encoder_fast_path_with_a_padding_mask():
    """nn.TransformerEncoder in inference with src_key_padding_mask takes torch's fast path on neuron (its
    device list names the PrivateUse1 backend): the batch becomes a nested tensor, which raised "NestedTensorImpl
    doesn't support strides". Nested tensors now run CPU's nested kernels on their device memory."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(3, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = encoder(x, src_key_padding_mask=mask)
        got = copy.deepcopy(encoder).to(N)(x.to(N), src_key_padding_mask=mask.to(N))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_nested_tensors_in_inference_against_cpu():
    torch.manual_seed(0)
    parts = [torch.randn(3, 4), torch.randn(2, 4)]
    linear = torch.nn.Linear(4, 5)
    results = {}
    for device in ("cpu", N):
        nested = torch.nested.nested_tensor([p.to(device) for p in parts])
        assert nested.is_nested and nested.device.type == torch.device(device).type
        with torch.no_grad():
            outs = [torch.nested.to_padded_tensor(t, 0.0) for t in
                    (nested, nested + nested, torch.relu(nested), torch.softmax(nested, -1),
                     copy.deepcopy(linear).to(device)(nested))]
        outs += list(nested.unbind())
        # copies across devices: _to_copy's BackendSelect sends both directions to the neuron kernel
        on_cpu = nested.to("cpu")
        assert on_cpu.is_nested and on_cpu.device.type == "cpu" and nested.cpu().device.type == "cpu"
        outs.append(torch.nested.to_padded_tensor(on_cpu, 0.0))
        from_cpu = torch.nested.nested_tensor(parts).to(device)
        assert from_cpu.device.type == torch.device(device).type
        outs.append(torch.nested.to_padded_tensor(from_cpu.to(torch.float64), 0.0))
        results[device] = [o.cpu() for o in outs]
    for expected, got in zip(results["cpu"], results[N]):
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_nested_tensors_under_autograd_against_cpu():
    """A nested tensor that requires grad: autograd reads its nested sizes when it records the first op.
    Through the CPU kernel that read took the sizes' memory from the tensor (its next op raised "data is not
    allocated yet"; `nested * 2` crashed the process). The metadata stays on the CPU, as on CUDA, and ops
    that build a nested tensor over a neuron buffer take it from there. Forward, backward and the metadata
    against CPU's."""
    torch.manual_seed(1)
    parts = [torch.randn(3, 4), torch.randn(2, 4)]
    linear = torch.nn.Linear(4, 5)
    results = {}
    for device in ("cpu", N):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nested tensors' prototype-stage warning
            nested = torch.nested.nested_tensor(parts, device=device, requires_grad=True)
        layer = copy.deepcopy(linear).to(device)
        out = torch.softmax(layer(torch.relu(nested * 2 - 0.5)), -1)
        weights = torch.arange(1.0, 6.0, device=device)
        # to_padded_tensor's backward rebuilds a nested tensor from the CPU sizes (_nested_from_padded)
        padded = torch.nested.to_padded_tensor(nested * nested, 0.0)
        (sum((o * weights).sum() for o in out.unbind()) + (padded * torch.arange(4.0, device=device)).sum()).backward()
        metadata = [nested._nested_tensor_size(), nested._nested_tensor_strides(),
                    nested._nested_tensor_storage_offsets()]
        assert all(m.device.type == "cpu" for m in metadata)
        assert [m.tolist() for m in metadata] == [[[3, 4], [2, 4]], [[4, 1], [4, 1]], [0, 12]]
        results[device] = [torch.nested.to_padded_tensor(out.detach(), 0.0), torch.nested.to_padded_tensor(
            nested.grad, 0.0), layer.weight.grad, layer.bias.grad]
        results[device] = [r.cpu() for r in results[device]]
    for expected, got in zip(results["cpu"], results[N]):
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
