"""Real instances' topologies, device-index checks at every entry point, one process per NeuronCore,
and what loading the plugin costs `import torch`."""
import json
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from conftest import GiB, check_ok, requires_default_topology, run_python, run_python_many

_PROBE = """
    import json, torch
    n = torch.neuron.device_count()
    props = torch.neuron.get_device_properties(n - 1)
    last = torch.ones(4, device=f"neuron:{n - 1}")
    print(json.dumps({"count": n, "accelerator": torch.accelerator.device_count(), "name": props.name,
                      "memory": props.total_memory, "sum": last.sum().item(), "device": str(last.device)}))
"""


def test_instances_emulate_with_their_counts_names_and_capacities():
    cases = [  # (environment, logical cores, name, HBM per logical core)
        ({"TORCH_NEURONX_CHIPS": "16"}, 64, "NeuronCore-v3 (trn2, LNC=2)", 24 * GiB),  # trn2.48xlarge
        ({"TORCH_NEURONX_CHIPS": "16", "NEURON_LOGICAL_NC_CONFIG": "1"}, 128, "NeuronCore-v3 (trn2, LNC=1)", 12 * GiB),
        ({}, 4, "NeuronCore-v3 (trn2, LNC=2)", 24 * GiB),  # trn2.3xlarge: one chip
        ({"TORCH_NEURONX_PLATFORM": "trn1", "TORCH_NEURONX_CHIPS": "16"}, 32, "NeuronCore-v2 (trn1, LNC=1)", 16 * GiB),
        ({"TORCH_NEURONX_PLATFORM": "trn3"}, 4, "NeuronCore-v4 (trn3, LNC=2)", 36 * GiB),
        ({"TORCH_NEURONX_PLATFORM": "trn3", "NEURON_LOGICAL_NC_CONFIG": "1"}, 8, "NeuronCore-v4 (trn3, LNC=1)",
         18 * GiB),
        ({"TORCH_NEURONX_CHIPS": "9", "NEURON_LOGICAL_NC_CONFIG": "1"}, 72, "NeuronCore-v3 (trn2, LNC=1)", 12 * GiB),
    ]
    results = run_python_many([(_PROBE, env) for env, *_ in cases])
    for (env, count, name, memory), result in zip(cases, results):
        info = json.loads(check_ok(result).strip().splitlines()[-1])
        assert info == {"count": count, "accelerator": count, "name": name, "memory": memory, "sum": 4.0,
                        "device": f"neuron:{count - 1}"}, env


def test_more_cores_than_a_process_can_use_is_a_clear_error():
    result = run_python("""
        import torch
        print(torch.neuron.is_available(), torch.neuron.device_count())
        torch.ones(1, device="neuron")
    """, env={"TORCH_NEURONX_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert result.returncode != 0
    assert result.stdout.split() == ["False", "0"]
    assert "136 logical NeuronCores" in result.stderr and "NEURON_RT_VISIBLE_CORES" in result.stderr
    assert "Segmentation fault" not in result.stderr


def test_the_128th_core_computes_but_torch_gives_it_no_autograd_queue():
    # PyTorch numbers devices with int8_t (c10/core/Device.h), and the autograd
    # engine makes one ready queue per device from DeviceGuardImplInterface::
    # deviceCount(), which returns that type: at most 127. neuron:127 of a
    # trn2.48xlarge at LNC=1 computes, and its backward fails with torch's
    # internal assert (engine.cpp, Engine::ready_queue) as a Python error.
    # (docs/topology.md; if torch widens DeviceIndex this test says so.)
    result = run_python("""
        import torch
        w = torch.ones(3, device="neuron:127", requires_grad=True)
        print((w * w).sum().item(), torch.neuron.device_count())
        v = torch.ones(3, device="neuron:126", requires_grad=True)
        (v * v).sum().backward()
        print(v.grad.device, v.grad.cpu().tolist())
        try:
            (w * w).sum().backward()
            print("backward ran")
        except RuntimeError as e:
            print("no queue", "device_ready_queues_" in str(e))
    """, env={"TORCH_NEURONX_CHIPS": "16", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert check_ok(result).strip().splitlines()[-3:] == ["3.0 128", "neuron:126 [2.0, 2.0, 2.0]", "no queue True"]


@requires_default_topology
@pytest.mark.parametrize("call", [
    lambda: torch.neuron.current_stream(100),
    lambda: torch.neuron.current_stream(4),
    lambda: torch.neuron.default_stream(4),
    lambda: torch.neuron.Stream(device=4),
    lambda: torch.neuron.synchronize(4),
    lambda: torch.neuron.set_device(4),
    lambda: torch.neuron.memory_allocated(4),
    lambda: torch.neuron.memory_stats(64),
    lambda: torch.neuron.reset_peak_memory_stats(100),
    lambda: torch.neuron.get_device_properties(4),
    lambda: torch.neuron.manual_seed(1) or torch.neuron.get_rng_state(4),
    lambda: torch.neuron.default_generators[4],
    lambda: torch.ones(1, device="neuron:4"),
    lambda: torch.ones(1).to("neuron:100"),
    lambda: torch.accelerator.current_stream(torch.device("neuron", 4)),
], ids=["current_stream_100", "current_stream", "default_stream", "Stream", "synchronize", "set_device",
        "memory_allocated", "memory_stats_64", "reset_peak_100", "properties", "rng_state", "generators", "factory",
        "to", "accelerator_stream"])
def test_every_device_index_entry_point_checks_its_index(call):
    with pytest.raises((IndexError, RuntimeError, ValueError)) as error:
        call()
    assert "neuron" in str(error.value) or "NeuronCore" in str(error.value), str(error.value)
    assert torch.neuron.current_device() == 0


# --- one process per NeuronCore ----------------------------------------------------------------

_HOLDER = """
    import sys, torch
    x = torch.ones(8, device="neuron:{core}")
    print("holding", flush=True)
    sys.stdin.readline()
"""


def _hold(core: int, env: dict) -> subprocess.Popen:
    from conftest import _child_env

    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_HOLDER.format(core=core))],
                              env=_child_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
    return holder


def _release(holder: subprocess.Popen) -> None:
    holder.communicate("done\n", timeout=60)


def test_a_core_belongs_to_one_process(tmp_path):
    env = {"TORCH_NEURONX_SHARE_CORES": "0", "TORCH_NEURONX_CORE_LOCK_DIR": str(tmp_path)}
    holder = _hold(0, env)
    try:
        same = run_python("import torch; torch.ones(1, device='neuron:0')", env=env)
        other = run_python("import torch; print(torch.ones(2, device='neuron:1').sum().item())", env=env)
        shared = run_python("import torch; print(torch.ones(3, device='neuron:0').sum().item())",
                            env={**env, "TORCH_NEURONX_SHARE_CORES": "1"})
        # At LNC=1, logical core 1 is physical core 1, which logical core 0 holds at LNC=2.
        overlapping = run_python("import torch; torch.ones(1, device='neuron:1')",
                                 env={**env, "NEURON_LOGICAL_NC_CONFIG": "1"})
    finally:
        _release(holder)
    assert same.returncode != 0
    assert f"in use by process {holder.pid}" in same.stderr, same.stderr
    assert "NEURON_RT_VISIBLE_CORES" in same.stderr and "TORCH_NEURONX_SHARE_CORES" in same.stderr
    assert check_ok(other).split() == ["2.0"]
    assert check_ok(shared).split() == ["3.0"]
    assert overlapping.returncode != 0 and f"in use by process {holder.pid}" in overlapping.stderr
    # The claim ends with the process.
    after = run_python("import torch; print(torch.ones(4, device='neuron:0').sum().item())", env=env)
    assert check_ok(after).split() == ["4.0"]


def test_ranks_that_never_set_their_device_collide_as_on_trainium(tmp_path):
    env = {"TORCH_NEURONX_SHARE_CORES": "0", "TORCH_NEURONX_CORE_LOCK_DIR": str(tmp_path)}
    rank = """
        import os, pathlib, time, torch
        rank, folder = int(os.environ["LOCAL_RANK"]), pathlib.Path(os.environ["TORCH_NEURONX_CORE_LOCK_DIR"])
        if os.environ["SET_DEVICE"] == "1":
            torch.neuron.set_device(rank)
        try:
            x = torch.ones(4, device="neuron")
            outcome = f"ok {x.device}"
        except RuntimeError as e:
            outcome = f"error {'is in use by process' in str(e)}"
        (folder / f"tried-{os.environ['SET_DEVICE']}-{rank}").touch()
        deadline = time.time() + 60  # both ranks stay alive until both have tried
        while len(list(folder.glob(f"tried-{os.environ['SET_DEVICE']}-*"))) < 2 and time.time() < deadline:
            time.sleep(0.05)
        print(outcome)
    """
    for set_device, expected in (("1", ["ok neuron:0", "ok neuron:1"]), ("0", ["error True", "ok neuron:0"])):
        results = run_python_many([(rank, {**env, "LOCAL_RANK": str(r), "SET_DEVICE": set_device}) for r in range(2)])
        assert sorted(check_ok(r).strip().splitlines()[-1] for r in results) == expected


# --- a light import ----------------------------------------------------------------------------
# Every `import torch` loads the plugin, so it must not drag in anything torch alone does not load.
# What that costs in time is benchmarks/bench_import.py's to say (no timed assertions in tests).

_LOADED_MODULES = """
    import json, sys, torch
    print(json.dumps(sorted(sys.modules)))
"""


def test_plugin_adds_only_its_own_modules_to_import_torch():
    light = check_ok(run_python("""
        import sys, torch
        print(sorted(m for m in ("torch._dynamo", "torch._inductor", "transformers") if m in sys.modules))
        print(torch.neuron.device_count())
    """))
    assert light.splitlines()[-2:] == ["[]", "4"]
    with_plugin = set(json.loads(check_ok(run_python(_LOADED_MODULES)).splitlines()[-1]))
    without = set(json.loads(check_ok(run_python(_LOADED_MODULES, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}))
                              .splitlines()[-1]))
    added = with_plugin - without
    assert "torch_neuronx._C" in added  # the comparison itself worked: autoload on vs off
    foreign = sorted(m for m in added if m != "torch.neuron" and m.split(".")[0] != "torch_neuronx")
    assert foreign == [], f"the plugin's import loads modules torch alone does not: {foreign}"


def test_compile_registers_the_device_when_first_needed():
    out = check_ok(run_python("""
        import sys, torch
        from torch._dynamo.device_interface import get_interface_for_device
        x = torch.arange(6.0, device="neuron")
        try:
            get_interface_for_device("neuron")
            print("registered early")
        except NotImplementedError:
            print("not yet")
        f = torch.compile(lambda a: (a * 2).sum(), backend="neuron")
        print(f(x).item(), get_interface_for_device("neuron").__name__)
        from torch._inductor.codegen.common import get_scheduling_for_device
        print(get_scheduling_for_device("neuron").__name__)
    """))
    assert out.splitlines()[-3:] == ["not yet", "30.0 NeuronInterface", "NeuronScheduling"]


def test_inductor_reaches_the_device_registration_by_itself():
    # The default backend, in a process where nothing named backend="neuron":
    # Inductor's own lookup of torch.neuron.Scheduling registers the device.
    result = run_python("""
        import torch
        x = torch.arange(6.0, device="neuron")
        print(torch.compile(lambda a: (a * 3).sum())(x).item())
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("neuron").__name__)
    """)
    lines = check_ok(result).splitlines()
    assert lines[-2:] == ["45.0", "NeuronInterface"]


# --- no process-wide side effects beyond the device -------------------------------------------

_XLA_PROBE = "import os, torch; print(os.environ.get('USE_TORCH_XLA', 'unset'), torch.neuron.device_count())"


def test_use_torch_xla_is_left_alone_without_torch_xla():
    assert check_ok(run_python(_XLA_PROBE)).split()[-2:] == ["unset", "4"]


def test_use_torch_xla_is_turned_off_where_torch_xla_is_installed(tmp_path):
    # transformers would take its XLA Neuron path for this package; find_spec sees
    # the package without importing it (the stand-in raises if imported).
    (tmp_path / "torch_xla").mkdir()
    (tmp_path / "torch_xla" / "__init__.py").write_text("raise ImportError('a stand-in, never imported')\n")
    import os

    path = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    assert check_ok(run_python(_XLA_PROBE, env={"PYTHONPATH": path})).split()[-2:] == ["0", "4"]


def test_cpu_tensors_of_unrelated_code_stay_host_memory():
    # The plugin's CPU-allocator hook hands out device memory only inside a kernel's scope.
    out = check_ok(run_python("""
        import json, torch
        def allocations():
            return [torch.neuron.memory_stats(i)["allocation.all.allocated"] for i in range(4)]
        def cpu_work():
            x = torch.randn(1000, 1000)
            y = (x @ x).relu_().sum(0)
            return [torch.empty(2**20) for _ in range(8)], y
        counts = [allocations()]
        cpu_work()
        counts.append(allocations())
        n = torch.ones(4, device="neuron") * 2  # device work on this thread, then CPU work again
        counts.append(allocations())
        cpu_work()
        counts.append(allocations())
        print(json.dumps(counts))
    """))
    start, after_cpu, after_device, after_more_cpu = json.loads(out.strip().splitlines()[-1])
    assert start == after_cpu == [0, 0, 0, 0]
    assert after_device[0] > 0 and after_device[1:] == [0, 0, 0]
    assert after_more_cpu == after_device


def _compiled_node(output):
    node, seen = output.grad_fn, []
    while node is not None and "CompiledFunction" not in type(node).__name__:
        seen.append(type(node).__name__)
        node = next((n for n, _ in node.next_functions if n is not None), None)
    assert node is not None, seen
    return node


def test_a_compiled_backward_that_raises_leaves_no_kernel_memory_scope():
    from torch_neuronx import _C

    compiled = torch.compile(lambda x: (x * 2).sin(), backend="neuron")
    x = torch.randn(64, device="neuron", requires_grad=True)
    out = compiled(x)

    def fail(grad_outputs):
        raise ValueError("fails between the compiled backward's two hooks")

    # Registered after the plugin's pre-hook, so it raises after the scope was entered.
    _compiled_node(out).register_prehook(fail)
    with pytest.raises(ValueError, match="between"):
        out.sum().backward()
    assert not _C._in_kernel_memory_scope()
    before = torch.neuron.memory_stats(0)["allocation.all.allocated"]
    cpu = [torch.empty(4096) for _ in range(4)]
    assert torch.neuron.memory_stats(0)["allocation.all.allocated"] == before
    # A backward that succeeds still runs in the scope and leaves none behind.
    w = torch.randn(64, device="neuron", requires_grad=True)
    compiled(w).sum().backward()
    torch.testing.assert_close(w.grad.cpu(), 2 * torch.cos(2 * w.detach().cpu()))
    assert not _C._in_kernel_memory_scope()
