// Ops that change which memory a tensor refers to (resize_, set_), and the
// few that read it back to the host (.item()).
#include <ATen/native/Resize.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/core/HostAlias.h"
#include "aten/core/NeuronAllocator.h"

namespace torch_neuronx {
namespace {

const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  // The CPU implementation grows storage through the storage's own allocator
  // (ours), on the current core: make that the tensor's core.
  c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& setStorage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                       c10::IntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device() ||
                  (source.device().type() == self.device().type() && source.nbytes() == 0),
              "set_: storage on ", source.device(), " cannot back a tensor on ", self.device());
  c10::DeviceGuard guard(self.device());
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& setStorageWhole(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return setStorage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& setTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return setStorage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& setEmpty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, neuronAllocator().allocateOn(self.device().index(), 0),
                     &neuronAllocator(), /*resizable=*/true);
  return setStorage(self, std::move(empty), 0, {0}, {});
}

c10::Scalar localScalarDense(const at::Tensor& self) { return at::_local_scalar_dense(cpuReadAlias(self)); }

void recordStream(at::Tensor& self, c10::Stream stream) {
  neuronAllocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage", TORCH_FN(setStorageWhole));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(setStorage));
  m.impl("set_.source_Tensor", TORCH_FN(setTensor));
  m.impl("set_", TORCH_FN(setEmpty));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));
  m.impl("record_stream", TORCH_FN(recordStream));
}

}  // namespace torch_neuronx
