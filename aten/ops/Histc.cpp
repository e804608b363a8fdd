// histc for every dtype. ATen's CPU kernel covers floating types only, but
// transformers' MoE routing calls histc on integer expert ids on every
// non-CPU device, so integers get a kernel of their own here.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>

#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

template <typename T>
void countIntoBins(const at::Tensor& input, int64_t bins, double low, double high, int64_t* counts) {
  const at::Tensor contiguous = input.contiguous();
  const T* data = contiguous.const_data_ptr<T>();
  if (low == high && contiguous.numel() > 0) {
    // As ATen does: an empty range means "use the data's range".
    low = static_cast<double>(*std::min_element(data, data + contiguous.numel()));
    high = static_cast<double>(*std::max_element(data, data + contiguous.numel()));
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  const double scale = static_cast<double>(bins) / (high - low);
  for (int64_t i = 0; i < contiguous.numel(); ++i) {
    const double value = static_cast<double>(data[i]);
    if (value < low || value > high) continue;
    const auto bin = std::min(static_cast<int64_t>((value - low) * scale), bins - 1);
    ++counts[bin];
  }
}

at::Tensor& histcOut(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                     at::Tensor& out) {
  checkWritten("aten::histc.out", out);  // a CPU out= is refused, as CUDA refuses it
  deviceOf("aten::histc.out", self, out);
  TORCH_CHECK(bins > 0, "histc: bins must be > 0, but got ", bins);
  const double low = min.toDouble(), high = max.toDouble();
  TORCH_CHECK(!(low > high), "histc: max must be larger than min");
  TORCH_CHECK(std::isfinite(low) && std::isfinite(high), "histc: range of [", low, ", ", high, "] is not finite");
  c10::DeviceGuard guard(self.device());
  at::Tensor out_alias = cpuAlias(out);
  if (at::isFloatingType(self.scalar_type())) {
    at::histc_out(out_alias, cpuReadAlias(self), bins, min, max);
  } else {
    at::Tensor counts = at::zeros({bins}, at::TensorOptions().dtype(at::kLong));
    AT_DISPATCH_INTEGRAL_TYPES(self.scalar_type(), "histc_neuron", [&] {
      countIntoBins<scalar_t>(cpuReadAlias(self), bins, low, high, counts.mutable_data_ptr<int64_t>());
    });
    out_alias.resize_({bins});
    out_alias.copy_(counts);
  }
  syncFromAlias(out_alias, out);
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  histcOut(self, bins, min, max, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", TORCH_FN(histc));
  m.impl("histc.out", TORCH_FN(histcOut));
}

}  // namespace torch_neuronx
