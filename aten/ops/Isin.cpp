// isin against a handful of values (generation's end-of-sequence and
// min-length checks test a whole vocabulary against one or two token ids).
// ATen's CPU kernel sorts elements and test values together unless the
// elements are few, about 175 us for a 32,000-token vocabulary; comparing
// each element with each test value is about ten times faster. Larger test
// sets keep the CPU kernel.
#include <ATen/ops/any.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/isin_cpu_dispatch.h>
#include <ATen/ops/logical_not.h>
#include <torch/library.h>

#include "aten/core/KernelMemory.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

constexpr int64_t kFewTestValues = 16;

at::Tensor isin(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique, bool invert) {
  const auto device = deviceOf("aten::isin.Tensor_Tensor", elements, test_elements);
  KernelMemoryScope memory(device);
  const at::Tensor values = cpuReadAlias(elements), tests = cpuReadAlias(test_elements);
  if (tests.numel() > kFewTestValues) {
    return fromCpuResult(at::cpu::isin(values, tests, assume_unique, invert), device);
  }
  // eq promotes the two dtypes as isin does; an empty test set matches nothing.
  at::Tensor found = at::eq(values.unsqueeze(-1), tests.reshape({-1})).any(-1);
  if (invert) found = at::logical_not(found);
  return fromCpuResult(found, device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("isin.Tensor_Tensor", TORCH_FN(isin)); }

}  // namespace torch_neuronx
