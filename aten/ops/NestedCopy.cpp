// Copies of nested tensors to and from neuron. _to_copy has a BackendSelect
// kernel: a copy to neuron of a CPU nested tensor, and a copy to the CPU of a
// neuron one, both dispatch as NestedTensorPrivateUse1. The CPU's nested kernel
// on aliases would leave the result on the wrong device; this copies the
// storage across and keeps the nested sizes, strides and offsets.
#include <ATen/ATen.h>
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

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) { m.impl("_to_copy", TORCH_FN(nestedToCopy)); }

}  // namespace
}  // namespace torch_neuronx
