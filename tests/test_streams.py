"""torch.neuron streams and events."""
import pytest
import torch

from conftest import requires_two_devices


def test_stream_creation_and_current_default():
    s = torch.neuron.Stream()
    hi = torch.neuron.Stream(priority=-1)
    assert isinstance(s, torch.Stream) and isinstance(hi, torch.Stream)
    assert s.device == torch.device("neuron:0") and hi.device == torch.device("neuron:0")
    default = torch.neuron.default_stream()
    current = torch.neuron.current_stream()
    assert current == default  # nothing made another stream current
    assert s != default and hi != default and s != hi
    assert s.query() and hi.query()
    s.synchronize()


def test_stream_context_makes_current_and_restores():
    s = torch.neuron.Stream()
    before = torch.neuron.current_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
        x = torch.ones(100, device="neuron") * 3
    assert torch.neuron.current_stream() == before
    assert x.sum().item() == 300.0
    with torch.neuron.stream(None):  # a no-op, as on CUDA
        assert torch.neuron.current_stream() == before
    with pytest.raises(KeyError):
        with torch.neuron.stream(s):
            raise KeyError("boom")
    assert torch.neuron.current_stream() == before


@requires_two_devices
def test_stream_on_other_device():
    s1 = torch.neuron.Stream(device="neuron:1")
    assert s1.device_index == 1
    with torch.neuron.stream(s1):
        assert torch.neuron.current_stream(1) == s1
        assert torch.neuron.current_stream(0) == torch.neuron.default_stream(0)
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)


def test_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    x = torch.ones(10, device="neuron")
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0


def test_event_timing_measures_work():
    a = torch.randn(2048, 2048, device="neuron")
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    for _ in range(2):
        a = a @ a
        a = a / a.norm()
    end.record()
    torch.neuron.synchronize()
    assert start.elapsed_time(end) > 0


def test_elapsed_time_without_timing_raises():
    start, end = torch.neuron.Event(), torch.neuron.Event()
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        start.elapsed_time(end)
    timed = torch.neuron.Event(enable_timing=True)
    timed.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        start.elapsed_time(timed)
    # the device still works
    assert torch.ones(2, device="neuron").sum().item() == 2


def test_wait_stream_wait_event_record_event():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        x = torch.arange(1000.0, device="neuron") * 2
    ev = s1.record_event()
    assert isinstance(ev, torch.Event) and ev.query()
    s2.wait_event(ev)
    s2.wait_stream(s1)
    torch.neuron.current_stream().wait_stream(s2)
    with torch.neuron.stream(s2):
        y = x + 1
    ev2 = torch.neuron.Event()
    s2.record_event(ev2)
    ev2.wait()
    ev2.synchronize()
    assert y.sum().item() == 2 * sum(range(1000)) + 1000
    e3 = torch.neuron.Event()
    e3.record(s1)
    e3.wait(s2)
    assert e3.query()


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="neuron")
    assert s.device.type == "neuron" and s.device_index >= 0
    e = torch.Event(device="neuron", enable_timing=True)
    e.record(s)
    assert e.query()
    e2 = torch.Event(device="neuron", enable_timing=True)
    torch.ones(1000, device="neuron").sum()
    e2.record(s)
    e2.synchronize()
    assert e.elapsed_time(e2) >= 0
    untimed = torch.Event(device="neuron")
    untimed.record(s)
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):  # torch.Event itself raises ValueError
        untimed.elapsed_time(e2)


def test_accelerator_current_stream_and_set_stream():
    default = torch.accelerator.current_stream()
    assert default.device.type == "neuron"
    assert default == torch.neuron.default_stream()
    s = torch.neuron.Stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.accelerator.current_stream() == s
        assert torch.neuron.current_stream() == s
        assert (torch.ones(3, device="neuron") + 1).tolist() == [2.0, 2.0, 2.0]
    finally:
        torch.accelerator.set_stream(default)
    assert torch.accelerator.current_stream() == default
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(default)
    assert torch.neuron.current_stream() == default


def test_record_stream():
    s = torch.neuron.Stream()
    x = torch.ones(256, device="neuron")
    x.record_stream(s)
    assert x.sum().item() == 256


def test_kernels_are_counted_per_core():
    import torch_neuronx

    a = torch.ones(8, device="neuron:0")
    before = torch_neuronx.kernels_run(0), torch_neuronx.kernels_run(1)
    for _ in range(5):
        a = a * 2
    after = torch_neuronx.kernels_run(0), torch_neuronx.kernels_run(1)
    assert after[0] - before[0] == 5
    assert after[1] == before[1]
    assert a.sum().item() == 8 * 32
