// The device checks of the boxed fallback, for kernels registered one by one:
// every neuron tensor of a call on one core, CPU tensors only as 0-dim scalars,
// and dtypes a NeuronCore lacks counted as CPU fallbacks.
#pragma once

#include <ATen/core/IListRef.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <optional>

#include "aten/core/HostAlias.h"
#include "aten/ops/FallbackAccounting.h"

namespace torch_neuronx {

struct DeviceOfCall {
  const char* op;
  int device = -1;
  std::optional<c10::ScalarType> unsupported;

  void visit(const at::Tensor& t) {
    if (!t.defined()) return;
    if (!isNeuron(t)) {
      TORCH_CHECK(t.device().is_cpu() && t.dim() == 0, "Expected all tensors to be on the same device, but got ",
                  t.device(), " in ", op, ", where a neuron tensor is required");
      return;
    }
    const int index = t.device().index();
    TORCH_CHECK(device < 0 || device == index, "Expected all tensors to be on the same device, but found at least ",
                "two devices, neuron:", device, " and neuron:", index, " (in ", op, ")");
    device = index;
    if (C10_UNLIKELY(lacksHardwareSupport(t.scalar_type()))) unsupported = t.scalar_type();
  }
  void visit(const std::optional<at::Tensor>& t) {
    if (t.has_value()) visit(*t);
  }
};

// A tensor the call writes (out=, an in-place op's self) must be a neuron
// tensor: a CPU scalar may only be read, as CUDA requires.
inline void checkWritten(const char* op, const at::Tensor& t) {
  TORCH_CHECK(isNeuron(t), "Expected all tensors to be on the same device, but got ", t.device(), " for the tensor ",
              op, " writes, where a neuron tensor is required");
}

// The CPU alias of `t` for a call that also writes `written` through `written_alias` (aliasBeside):
// one tensor gives the same alias object, so that the CPU kernel sees an in-place call (and refuses a
// broadcast larger than the tensor) instead of a resizable output.
inline at::Tensor aliasSharing(const at::Tensor& t, const at::Tensor& written, const at::Tensor& written_alias) {
  if (auto beside = aliasBeside(t, written, written_alias)) return *beside;
  return cpuReadAlias(t);
}

// The core of the call's neuron tensors, after the checks above.
template <typename... Tensors>
c10::DeviceIndex deviceOf(const char* op, const Tensors&... tensors) {
  DeviceOfCall call{op};
  (call.visit(tensors), ...);
  if (C10_UNLIKELY(call.unsupported.has_value())) noteCpuFallback(op, *call.unsupported);
  return static_cast<c10::DeviceIndex>(call.device);
}

// The same for a list of tensors (cat's).
inline c10::DeviceIndex deviceOfList(const char* op, const at::ITensorListRef& tensors) {
  DeviceOfCall call{op};
  for (const at::Tensor& t : tensors) call.visit(t);
  if (C10_UNLIKELY(call.unsupported.has_value())) noteCpuFallback(op, *call.unsupported);
  return static_cast<c10::DeviceIndex>(call.device);
}

}  // namespace torch_neuronx
