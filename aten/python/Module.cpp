// torch_neuronx._C: the few runtime facts the Python layer needs that torch's
// generic device APIs do not expose (topology, per-core memory, fallbacks).
// Loading this module registers the device with torch through the static
// initialisers of aten/ (guard, hooks, allocators, kernels, autocast).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>

#include "aten/core/KernelMemory.h"
#include "aten/kernels/AmxBf16.h"
#include "aten/kernels/WidenedSimd.h"
#include "aten/python/CompileBindings.h"
#include "aten/python/DistributedBindings.h"
#include "aten/python/NkiBindings.h"
#include "aten/core/NeuronAllocator.h"
#include "aten/core/NeuronGenerator.h"
#include "aten/core/NeuronGuard.h"
#include "aten/core/NeuronHostAllocator.h"
#include "aten/ops/FallbackAccounting.h"
#include "aten/ops/HostKernelFallback.h"
#include "runtime/Runtime.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace {

py::dict topologyInfo() {
  const auto& topology = nrt::Topology::instance();
  py::dict info;
  info["valid"] = topology.valid();
  info["error"] = topology.error();
  if (!topology.valid()) return info;
  info["platform"] = topology.platform().name;
  info["lnc"] = topology.lnc();
  info["chips"] = topology.chips();
  info["device_name"] = topology.deviceName();
  info["bf16_tflops_per_core"] = topology.platform().bf16_tflops_per_physical_core * topology.lnc();
  py::list cores;
  for (int i = 0; i < topology.coreCount(); ++i) {
    const auto& core = topology.core(i);
    py::dict entry;
    entry["logical_id"] = core.logical_id;
    entry["chip"] = core.chip;
    entry["physical_cores"] = py::make_tuple(core.physical_first, core.physical_first + core.physical_count - 1);
    entry["hbm_bytes"] = core.hbm_bytes;
    cores.append(entry);
  }
  info["cores"] = cores;
  return info;
}

nrt::DeviceMemory& memory(int device) {
  checkDeviceIndex(device);
  return nrt::Runtime::instance().memory(device);
}

}  // namespace
}  // namespace torch_neuronx

PYBIND11_MODULE(_C, m) {
  using namespace torch_neuronx;
  m.doc() = "The emulated NeuronCore runtime behind torch's 'neuron' device";
  installKernelMemory();
  routeStructuredOpsToHostKernels();
  m.def("_topology", &topologyInfo);
  m.def("_device_count", [] { return visibleCoreCount(); });
  // What the device's own kernels run on this CPU (TORCH_NEURONX_SIMD may lower it).
  m.def("_simd_level", [] {
    switch (simdLevel()) {
      case SimdLevel::kAmx: return hasAmxBf16() ? "amx" : "avx512bf16 (AMX tile state refused by the OS)";
      case SimdLevel::kAvx512Bf16: return "avx512bf16";
      case SimdLevel::kAvx512: return "avx512";
      case SimdLevel::kAvx2: return "avx2";
      default: return "scalar";
    }
  });
  m.def("_check_device", [](int device) { checkDeviceIndex(device); });
  m.def("_capacity", [](int device) { return memory(device).capacity(); });
  m.def("_set_memory_fraction", [](double fraction, int device) { memory(device).setFraction(fraction); });
  m.def("_kernels_submitted", [](int device) { return nrt::Streams::instance().submitted(device); });
  m.def("_is_pinned", [](uintptr_t address) { return hostAllocator().isPinned(reinterpret_cast<void*>(address)); });
  m.def("_default_generator", [](int device) {
    checkDeviceIndex(device);
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(defaultGenerator(static_cast<c10::DeviceIndex>(device))));
  });
  // torch.Event.elapsed_time accepts only exact torch.Event arguments; the
  // torch.neuron.Event subclass measures through this instead.
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()), "elapsed_time expects torch.Event objects");
    const c10::Event& first = reinterpret_cast<THPEvent*>(start.ptr())->event;
    const c10::Event& last = reinterpret_cast<THPEvent*>(end.ptr())->event;
    TORCH_CHECK(first.flag() == c10::EventFlag::BACKEND_DEFAULT && last.flag() == c10::EventFlag::BACKEND_DEFAULT,
                "Both events must be created with argument 'enable_timing=True'");
    return first.elapsedTime(last);
  });
  m.def("_fallback_counts", &cpuFallbackCounts);
  m.def("_reset_fallback_counts", &resetCpuFallbackCounts);
  bindCompile(m);
  bindDistributed(m);
  bindNki(m);
}
