"""torch.save/torch.load, deepcopy, storage resize and safetensors with neuron tensors."""
import copy
import io

import torch
import torch.nn as nn

from conftest import requires_two_devices


def _tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "f32": torch.randn(4, 5, generator=g),
        "bf16": torch.randn(7, generator=g).bfloat16(),
        "i64": torch.arange(10),
        "bool": torch.tensor([True, False, True]),
    }


def test_save_load_file_roundtrip(tmp_path):
    cpu = _tensors()
    dev = {k: v.to("neuron") for k, v in cpu.items()}
    dev["view"] = dev["f32"].t()[1:3]  # a strided view shares storage with f32
    path = tmp_path / "t.pt"
    torch.save(dev, path)
    loaded = torch.load(path)
    for k, v in cpu.items():
        assert loaded[k].device == torch.device("neuron:0"), k
        assert torch.equal(loaded[k].cpu(), v), k
    assert torch.equal(loaded["view"].cpu(), cpu["f32"].t()[1:3])
    assert loaded["view"].untyped_storage().data_ptr() == loaded["f32"].untyped_storage().data_ptr()


def test_save_load_state_dict_bytesio():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(4)).to("neuron")
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    fresh = nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(4)).to("neuron")
    fresh.load_state_dict(sd)
    x = torch.randn(3, 6, device="neuron")
    assert torch.equal(fresh(x).cpu(), model(x).cpu())
    for k, v in model.state_dict().items():
        assert sd[k].device == v.device and torch.equal(sd[k].cpu(), v.cpu()), k


def test_map_location_cpu(tmp_path):
    cpu = _tensors()
    path = tmp_path / "t.pt"
    torch.save({k: v.to("neuron") for k, v in cpu.items()}, path)
    loaded = torch.load(path, map_location="cpu")
    for k, v in cpu.items():
        assert loaded[k].device.type == "cpu" and torch.equal(loaded[k], v), k


@requires_two_devices
def test_map_location_other_core(tmp_path):
    cpu = _tensors()
    path = tmp_path / "t.pt"
    torch.save({k: v.to("neuron:0") for k, v in cpu.items()}, path)
    loaded = torch.load(path, map_location="neuron:1")
    for k, v in cpu.items():
        assert loaded[k].device == torch.device("neuron:1"), k
        assert torch.equal(loaded[k].cpu(), v), k
    # and a tensor saved on neuron:1 loads back on neuron:1 without map_location
    torch.save(cpu["f32"].to("neuron:1"), path)
    assert torch.load(path).device == torch.device("neuron:1")


def test_load_cpu_checkpoint_to_neuron(tmp_path):
    cpu = _tensors()
    path = tmp_path / "cpu.pt"
    torch.save(cpu, path)
    loaded = torch.load(path, map_location="neuron")
    for k, v in cpu.items():
        assert loaded[k].device.type == "neuron", k
        assert torch.equal(loaded[k].cpu(), v), k
    loaded2 = torch.load(path, map_location=torch.device("neuron", 0))
    assert loaded2["i64"].device == torch.device("neuron:0")


def test_deepcopy_tensor_and_module():
    t = torch.randn(3, 4, device="neuron", requires_grad=True)
    c = copy.deepcopy(t)
    assert c.device == t.device and c.requires_grad
    assert c.data_ptr() != t.data_ptr()
    assert torch.equal(c.detach().cpu(), t.detach().cpu())
    with torch.no_grad():
        c.add_(1)
    assert not torch.equal(c.detach().cpu(), t.detach().cpu())

    model = nn.Linear(4, 2).to("neuron")
    clone = copy.deepcopy(model)
    assert clone.weight.device.type == "neuron"
    assert clone.weight.data_ptr() != model.weight.data_ptr()
    x = torch.randn(5, 4, device="neuron")
    assert torch.equal(clone(x).cpu(), model(x).cpu())


def test_untyped_storage_resize():
    t = torch.arange(8, dtype=torch.float32, device="neuron")
    storage = t.untyped_storage()
    assert storage.nbytes() == 32 and storage.device.type == "neuron"
    storage.resize_(64)
    assert storage.nbytes() == 64 and storage.device.type == "neuron"
    grown = torch.empty(0, dtype=torch.float32, device="neuron").set_(storage, 0, (16,), (1,))
    assert grown[:8].tolist() == [float(i) for i in range(8)]  # old contents kept
    storage.resize_(8)
    assert storage.nbytes() == 8
    shrunk = torch.empty(0, dtype=torch.float32, device="neuron").set_(storage, 0, (2,), (1,))
    assert shrunk.tolist() == [0.0, 1.0]
    storage.resize_(0)
    assert storage.nbytes() == 0
    # a freshly created device storage
    s = torch.UntypedStorage(16, device="neuron")
    assert s.device.type == "neuron" and s.nbytes() == 16


def test_safetensors_roundtrip(tmp_path):
    from safetensors.torch import load_file, save_file

    cpu = _tensors()
    dev = {k: v.to("neuron") for k, v in cpu.items()}
    path = str(tmp_path / "t.safetensors")
    save_file({k: v.cpu() for k, v in dev.items()}, path)
    loaded = load_file(path)
    for k, v in cpu.items():
        assert torch.equal(loaded[k], v), k
        back = loaded[k].to("neuron")
        assert torch.equal(back.cpu(), v), k
