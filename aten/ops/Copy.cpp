// Copies to, from and between neuron tensors: the emulated DMA. Same-dtype
// dense copies go straight to the runtime's copy engine; conversions and
// strided layouts use ATen's CPU copy kernel on zero-copy aliases.
#include <ATen/MemoryOverlap.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/core/HostAlias.h"
#include "runtime/Copy.h"
#include "runtime/Stream.h"

namespace torch_neuronx {
namespace {

bool sameDenseLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.is_non_overlapping_and_dense() && a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  // self is the source.
  TORCH_CHECK(self.device().is_cpu() || isNeuron(self), "cannot copy from ", self.device(), " to neuron");
  TORCH_CHECK(dst.device().is_cpu() || isNeuron(dst), "cannot copy from neuron to ", dst.device());
  if (dst.numel() == 0) return dst;
  // ATen's copy_ hands a copy between neuron tensors over before its partial-overlap check (an internal
  // overlap of dst it refuses itself): the CPU device's error.
  if (isNeuron(dst) && isNeuron(self)) at::assert_no_partial_overlap(dst, self);
  const at::Tensor& on_device = isNeuron(dst) ? dst : self;
  c10::DeviceGuard guard(on_device.device());
  if (sameDenseLayout(self, dst) && !dst.is_neg() && !dst.is_conj()) {
    nrt::copyBytes(dst.data_ptr(), self.const_data_ptr(), dst.nbytes());
  } else {
    at::Tensor dst_alias = cpuAlias(dst);
    dst_alias.copy_(cpuReadAlias(self));
  }
  nrt::Streams::instance().noteSubmitted(on_device.device().index());
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    c10::DeviceGuard guard(dst.device());
    dst.resize_(self.sizes());
  }
  return copyFrom(self, dst, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
}

// copyFrom honours conjugate and negative bits itself (its CPU aliases carry
// them). Without these fallthroughs the conjugate/negative fallbacks would
// materialise the source by cloning it, and a clone is a copy: endless recursion.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuronx
