// Whether Module.to("neuron") may move a parameter by swapping its data
// (param.data = moved) rather than replacing the Parameter object. torch
// leaves this to PrivateUse1 backends; without it an optimizer built before
// .to("neuron") keeps stale CPU parameters and tied weights come apart.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

bool isDenseCpuOrNeuron(const at::Tensor& t) {
  return t.layout() == c10::kStrided && (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
}

bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  if (isDenseCpuOrNeuron(self) && isDenseCpuOrNeuron(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
}

}  // namespace torch_neuronx
