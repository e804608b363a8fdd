"""Device registration, device strings, torch.accelerator and torch.neuron basics, topology."""
import json

import pytest
import torch

from conftest import DEFAULT_CORES, DEFAULT_HBM, GiB, check_ok, requires_default_topology, run_python, run_python_many


# --- registration -----------------------------------------------------------------------------

def test_import_torch_alone_registers_device():
    out = check_ok(run_python("""
        import json, torch
        info = {
            "has_module": hasattr(torch, "neuron"),
            "backend": torch._C._get_privateuse1_backend_name(),
            "device": str(torch.device("neuron")),
            "tensor": str(torch.ones(2, device="neuron").device),
            "count": torch.neuron.device_count(),
        }
        import transformers.utils.import_utils as tu
        import accelerate.utils as au
        info["transformers"] = bool(tu.is_torch_neuron_available())
        info["accelerate"] = bool(au.is_neuron_available())
        print(json.dumps(info))
    """))
    info = json.loads(out.strip().splitlines()[-1])
    assert info == {"has_module": True, "backend": "neuron", "device": "neuron", "tensor": "neuron:0",
                    "count": DEFAULT_CORES, "transformers": True, "accelerate": True}


def test_import_torch_neuronx_before_torch():
    # torch's autoload finds the package half loaded (it is the one importing torch): no circular-import error.
    out = check_ok(run_python("""
        import torch_neuronx
        import torch
        print(torch.arange(4, device="neuron").sum().item(), torch._C._get_privateuse1_backend_name())
    """))
    assert out.split() == ["6", "neuron"]


def test_autoload_disabled_needs_explicit_import():
    out = check_ok(run_python("""
        import json, torch
        before = {"module": hasattr(torch, "neuron"), "backend": torch._C._get_privateuse1_backend_name()}
        try:
            torch.device("neuron")
            before["device_ok"] = True
        except RuntimeError:
            before["device_ok"] = False
        import torch_neuronx
        after = {"module": hasattr(torch, "neuron"), "backend": torch._C._get_privateuse1_backend_name(),
                 "sum": torch.arange(4, device="neuron").sum().item()}
        print(json.dumps([before, after]))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}))
    before, after = json.loads(out.strip().splitlines()[-1])
    assert before == {"module": False, "backend": "privateuseone", "device_ok": False}
    assert after == {"module": True, "backend": "neuron", "sum": 6}


# --- device strings and tensor/module/storage methods ----------------------------------------------

@requires_default_topology
def test_device_strings():
    assert torch.device("neuron").type == "neuron" and torch.device("neuron").index is None
    d1 = torch.device("neuron:1")
    assert (d1.type, d1.index) == ("neuron", 1)
    assert torch.device(1) == torch.device("neuron", 1)
    t = torch.zeros(3, device="neuron:1")
    assert t.device == d1 and t.get_device() == 1
    assert torch.ones(2, device="neuron").device == torch.device("neuron:0")


def test_tensor_neuron_method_and_is_neuron():
    cpu = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    n = cpu.neuron()
    assert n.is_neuron and not cpu.is_neuron
    assert n.device == torch.device("neuron:0")
    torch.testing.assert_close(n.cpu(), cpu, rtol=0, atol=0)
    n1 = cpu.neuron(1)
    assert n1.device == torch.device("neuron:1")
    torch.testing.assert_close(n1.cpu(), cpu, rtol=0, atol=0)


def test_module_neuron_method():
    lin = torch.nn.Linear(4, 3)
    ref = lin(torch.ones(2, 4))
    lin.neuron()
    assert all(p.device == torch.device("neuron:0") for p in lin.parameters())
    out = lin(torch.ones(2, 4, device="neuron"))
    torch.testing.assert_close(out.cpu(), ref)


def test_untyped_storage_neuron():
    cpu = torch.arange(5, dtype=torch.int32)
    storage = cpu.untyped_storage().neuron()
    assert storage.device == torch.device("neuron:0")
    assert storage.is_neuron
    assert storage.nbytes() == 20
    back = torch.tensor([], dtype=torch.int32).set_(storage.cpu())
    assert back.tolist() == [0, 1, 2, 3, 4]


# --- torch.accelerator ---------------------------------------------------------------------------

@requires_default_topology
def test_accelerator_api():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == DEFAULT_CORES
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(2)
    assert torch.accelerator.current_device_index() == 2
    assert torch.neuron.current_device() == 2
    assert torch.empty(1, device="neuron").device == torch.device("neuron:2")
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(3):
        assert torch.accelerator.current_device_index() == 3
        assert torch.ones(1, device="neuron").device.index == 3
    assert torch.accelerator.current_device_index() == 0
    x = torch.ones(64, device="neuron") * 2
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    assert x.sum().item() == 128.0


# --- torch.neuron ------------------------------------------------------------------------------

@requires_default_topology
def test_neuron_default_topology():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == DEFAULT_CORES
    for i in range(DEFAULT_CORES):
        props = torch.neuron.get_device_properties(i)
        assert props.total_memory == 24 * GiB == DEFAULT_HBM
        assert props.logical_core_id == i
    assert "NeuronCore" in torch.neuron.get_device_name(0)
    assert torch.neuron.get_device_name() == torch.neuron.get_device_properties(0).name
    assert torch.neuron.get_device_properties("neuron:1").logical_core_id == 1
    assert torch.neuron.get_device_properties(torch.device("neuron", 3)).logical_core_id == 3


@requires_default_topology
def test_set_device_int_str_device():
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device("neuron:2")
    assert torch.neuron.current_device() == 2
    torch.neuron.set_device(torch.device("neuron", 3))
    assert torch.neuron.current_device() == 3
    assert torch.zeros(1, device="neuron").device == torch.device("neuron:3")
    torch.neuron.set_device(0)
    assert torch.neuron.current_device() == 0


@requires_default_topology
def test_device_context_manager():
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        with torch.neuron.device("neuron:1"):
            assert torch.neuron.current_device() == 1
            assert torch.empty(1, device="neuron").device.index == 1
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 0
    t = torch.ones(1, device="neuron:3")
    with torch.neuron.device_of(t):
        assert torch.neuron.current_device() == 3
    assert torch.neuron.current_device() == 0
    with pytest.raises(ZeroDivisionError):
        with torch.neuron.device(1):
            1 / 0
    assert torch.neuron.current_device() == 0


@requires_default_topology
def test_current_device_is_per_thread():
    import threading

    seen = {}

    def worker():
        seen["start"] = torch.neuron.current_device()
        torch.neuron.set_device(2)
        seen["tensor"] = torch.ones(1, device="neuron").device.index

    torch.neuron.set_device(1)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"start": 0, "tensor": 2}  # a new thread starts on neuron:0, as on CUDA
    assert torch.neuron.current_device() == 1  # the worker's choice did not leak


def test_bf16_and_amp_dtypes():
    assert torch.neuron.is_bf16_supported() is True
    dtypes = torch.neuron.get_amp_supported_dtype()
    assert torch.bfloat16 in dtypes and torch.float16 in dtypes
    assert torch.float32 not in dtypes


# --- topology from the environment -----------------------------------------------------------

_TOPOLOGY_PROBE = """
    import json, torch
    n = torch.neuron.device_count()
    mem = [torch.neuron.get_device_properties(i).total_memory for i in range(n)]
    last = torch.arange(3, device=f"neuron:{n - 1}").sum().item()
    print(json.dumps({"count": n, "mem": mem, "last": last}))
"""


def test_topology_env_vars():
    cases = [
        ({"NEURON_RT_VISIBLE_CORES": "1-2"}, 2, 24 * GiB),
        ({"NEURON_RT_NUM_CORES": "3"}, 3, 24 * GiB),
        ({"NEURON_LOGICAL_NC_CONFIG": "1"}, 8, 12 * GiB),
        ({"TORCH_NEURONX_PLATFORM": "trn1"}, 2, 16 * GiB),
    ]
    results = run_python_many([(_TOPOLOGY_PROBE, env) for env, _, _ in cases])
    for (env, count, mem), result in zip(cases, results):
        info = json.loads(check_ok(result).strip().splitlines()[-1])
        assert info == {"count": count, "mem": [mem] * count, "last": 3}, env
