// The calls a compiled neuron graph makes on every run (torch_neuronx/compile):
// crossing to host views and back, and the kernel-memory scope that puts the
// graph's buffers in device memory.
#include "aten/python/CompileBindings.h"

#include <torch/csrc/utils/pybind.h>

#include <memory>

#include "aten/compile/GraphBridge.h"
#include "aten/core/KernelMemory.h"
#include "aten/core/NeuronGuard.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace {

// A Python context manager over KernelMemoryScope.
class KernelScope {
 public:
  explicit KernelScope(int device) : device_(static_cast<c10::DeviceIndex>(device)) { checkDeviceIndex(device); }
  void enter() {
    TORCH_CHECK(!scope_, "a kernel memory scope cannot be entered twice");
    scope_ = std::make_unique<KernelMemoryScope>(device_);
  }
  void exit() { scope_.reset(); }

 private:
  c10::DeviceIndex device_;
  std::unique_ptr<KernelMemoryScope> scope_;
};

}  // namespace

void bindCompile(py::module& m) {
  m.def("_host_views", &hostViews, py::arg("inputs"));
  m.def(
      "_device_results",
      [](const std::vector<at::Tensor>& results, int device, const std::vector<at::Tensor>& inputs,
         const std::vector<at::Tensor>& host_inputs) {
        return deviceResults(results, static_cast<c10::DeviceIndex>(device), inputs, host_inputs);
      },
      py::arg("results"), py::arg("device"), py::arg("inputs"), py::arg("host_inputs"));
  m.def("_enter_backward_scope", [](int device) {
    checkDeviceIndex(device);
    enterBackwardScope(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_leave_backward_scope", &leaveBackwardScope);
  m.def("_in_kernel_memory_scope", &inKernelMemoryScope);
  py::class_<KernelScope>(m, "_KernelScope")
      .def(py::init<int>())
      .def("__enter__", [](KernelScope& self) { self.enter(); })
      .def("__exit__", [](KernelScope& self, py::args) { self.exit(); });
}

}  // namespace torch_neuronx
