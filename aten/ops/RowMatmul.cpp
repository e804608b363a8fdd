#include "aten/ops/RowMatmul.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mv.h>
#include <torch/library.h>

#include <vector>

#include "aten/kernels/Bf16Gemv.h"
#include "aten/kernels/FewRowsGemm.h"
#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {

bool isRowTimesWeight(const at::Tensor& left, const at::Tensor& right) {
  if (left.dim() != 2 || right.dim() != 2 || left.size(0) != 1 || left.size(1) != right.size(0)) return false;
  if (left.scalar_type() != right.scalar_type()) return false;
  if (left.scalar_type() != at::kFloat && left.scalar_type() != at::kBFloat16) return false;
  return right.stride(0) == 1 && right.stride(1) == right.size(0) && left.stride(1) == 1;
}

void rowTimesWeightInto(at::Tensor& out, const at::Tensor& left, const at::Tensor& right) {
  if (left.scalar_type() == at::kBFloat16 && out.is_contiguous()) {
    // right is W^T of a contiguous weight W [N, K] (isRowTimesWeight).
    bf16Gemv(right.const_data_ptr<c10::BFloat16>(), left.const_data_ptr<c10::BFloat16>(),
             out.mutable_data_ptr<c10::BFloat16>(), right.size(1), right.size(0));
    return;
  }
  if (isFewRowsTimesWeight(left, right) && out.is_contiguous()) {
    // Streams the weight faster than OpenBLAS's gemv here (35 against 32 GB/s, benchmarks/bench_matmul.py).
    fewRowsTimesWeightInto(out, left, right);
    return;
  }
  at::Tensor result = out.view({out.size(1)});
  at::mv_out(result, right.t(), left.view({left.size(1)}));
}

namespace {

// y[c0:c1] = sum over k of x[k] * matrix[k, c0:c1], in fp32.
template <typename T>
void rowTimesMatrixColumns(const float* x, const T* matrix, int64_t K, int64_t N, T* y, int64_t c0, int64_t c1) {
  std::vector<float> acc(c1 - c0, 0.f);
  for (int64_t k = 0; k < K; ++k) axpyWidened(x[k], matrix + k * N + c0, acc.data(), c1 - c0);
  for (int64_t c = c0; c < c1; ++c) y[c] = static_cast<T>(acc[c - c0]);
}

template <typename T>
void rowTimesMatrix(const T* x, const T* matrix, int64_t K, int64_t N, T* y) {
  const std::vector<float> xs(x, x + K);
  // Each helper takes a band of at least 256 columns (1 KiB of each fp32 row) and walks all rows.
  parallelRows(N, 256, [&](int64_t c0, int64_t c1) { rowTimesMatrixColumns(xs.data(), matrix, K, N, y, c0, c1); });
}

}  // namespace

bool isRowTimesMatrix(const at::Tensor& left, const at::Tensor& right) {
  if (left.dim() != 2 || right.dim() != 2 || left.size(0) != 1 || left.size(1) != right.size(0)) return false;
  if (left.scalar_type() != right.scalar_type()) return false;
  if (left.scalar_type() != at::kFloat && left.scalar_type() != at::kBFloat16) return false;
  return right.is_contiguous() && left.stride(1) == 1;
}

void rowTimesMatrixInto(at::Tensor& out, const at::Tensor& left, const at::Tensor& right) {
  const int64_t K = right.size(0), N = right.size(1);
  if (left.scalar_type() == at::kFloat) {
    rowTimesMatrix(left.const_data_ptr<float>(), right.const_data_ptr<float>(), K, N, out.mutable_data_ptr<float>());
  } else {
    rowTimesMatrix(left.const_data_ptr<c10::BFloat16>(), right.const_data_ptr<c10::BFloat16>(), K, N,
                   out.mutable_data_ptr<c10::BFloat16>());
  }
}

namespace {

// neuron::linear: F.linear for the graphs the neuron compile backend runs on
// the host (torch_neuronx/compile). Inductor would call a GEMM for a
// one-row linear; this kernel takes the matrix-vector route.
at::Tensor hostLinear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const bool one_row = input.dim() >= 1 && input.numel() == input.size(-1) && weight.dim() == 2 &&
                       weight.is_contiguous() && input.is_contiguous();
  if (!one_row || !isRowTimesWeight(input.view({1, input.size(-1)}), weight.t())) {
    return at::linear(input, weight, bias);
  }
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes.back() = weight.size(0);
  at::Tensor out = at::empty(sizes, input.options());
  at::Tensor out2d = out.view({1, weight.size(0)});
  rowTimesWeightInto(out2d, input.view({1, input.size(-1)}), weight.t());
  if (bias.has_value() && bias->defined()) out.add_(*bias);
  return out;
}

at::Tensor hostLinearMeta(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  TORCH_CHECK(!sizes.empty() && weight.dim() == 2 && sizes.back() == weight.size(1),
              "neuron::linear: input ", input.sizes(), " does not match weight ", weight.sizes());
  sizes.back() = weight.size(0);
  return at::empty(sizes, input.options());
}

}  // namespace

TORCH_LIBRARY(neuron, m) { m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"); }

TORCH_LIBRARY_IMPL(neuron, CPU, m) { m.impl("linear", TORCH_FN(hostLinear)); }

TORCH_LIBRARY_IMPL(neuron, Meta, m) { m.impl("linear", TORCH_FN(hostLinearMeta)); }

}  // namespace torch_neuronx
