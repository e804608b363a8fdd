// Nested tensors on neuron: what the CPU device's nested kernels, run on
// aliases by the boxed fallback, would get wrong for them.
// - Copies: _to_copy has a BackendSelect kernel, so a copy to neuron of a CPU
//   nested tensor and a copy to the CPU of a neuron one both dispatch as
//   NestedTensorPrivateUse1; the CPU's kernel on aliases would leave the
//   result on the wrong device. This copies the storage across and keeps the
//   nested sizes, strides and offsets.
// - Metadata: a nested tensor's sizes, strides and offsets are CPU tensors on
//   every device, and CUDA's kernels return them as they are. Autograd reads
//   the sizes of every nested tensor that requires grad; a neuron copy of them
//   would make autograd's shape checks compare tensors on two devices.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <torch/library.h>

#include <optional>

#include "aten/core/HostAlias.h"

namespace torch_neuronx {
namespace {

at::Tensor nestedToCopy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> /*pin_memory*/, bool non_blocking,
                        std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided, "a nested tensor copies to the strided layout only, not ",
              *layout);
  TORCH_CHECK(!memory_format.has_value() || *memory_format == at::MemoryFormat::Preserve ||
                  *memory_format == at::MemoryFormat::Contiguous,
              "a nested tensor copies with a preserved or contiguous memory format only");
  const at::Tensor storage = nestedStorage(self);
  const at::Tensor copied = storage.to(device.value_or(self.device()), dtype.value_or(self.scalar_type()),
                                       non_blocking, /*copy=*/true);
  return nestedOver(copied, self);
}

at::Tensor nestedSizes(const at::Tensor& self) { return at::native::get_nested_tensor_impl(self)->get_nested_sizes(); }

at::Tensor nestedStrides(const at::Tensor& self) {
  return at::native::get_nested_tensor_impl(self)->get_nested_strides();
}

at::Tensor nestedOffsets(const at::Tensor& self) {
  return at::native::get_nested_tensor_impl(self)->get_storage_offsets();
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", TORCH_FN(nestedToCopy));
  m.impl("_nested_tensor_size", TORCH_FN(nestedSizes));
  m.impl("_nested_tensor_strides", TORCH_FN(nestedStrides));
  m.impl("_nested_tensor_storage_offsets", TORCH_FN(nestedOffsets));
}

}  // namespace
}  // namespace torch_neuronx
