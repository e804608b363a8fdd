#include "aten/ops/DecodeMatmul.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <torch/library.h>

#include <type_traits>
#include <vector>

#include "aten/kernels/AmxBf16.h"
#include "aten/kernels/Bf16Gemv.h"
#include "aten/kernels/FewRowsGemm.h"
#include "aten/kernels/RowTimesMatrix.h"

namespace torch_neuronx {
namespace {

enum class DecodeShape { kNone, kRowsTimesWeight, kRowsTimesMatrix };

DecodeShape decodeShapeOf(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias) {
  if (left.dim() != 2 || right.dim() != 2 || left.size(1) != right.size(0) || left.size(0) < 1) {
    return DecodeShape::kNone;
  }
  const auto dtype = left.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kBFloat16) || right.scalar_type() != dtype || left.stride(1) != 1) {
    return DecodeShape::kNone;
  }
  if (bias.defined() && (bias.scalar_type() != dtype || bias.dim() != 1 || bias.size(0) != right.size(1) ||
                         !bias.is_contiguous())) {
    return DecodeShape::kNone;
  }
  const int64_t rows = left.size(0);
  const bool weight_transposed = right.stride(0) == 1 && right.stride(1) == right.size(0);
  if (weight_transposed && rows == 1 && dtype == at::kBFloat16) return DecodeShape::kRowsTimesWeight;
  if (weight_transposed && rows <= kAmxRows && dtype == at::kBFloat16 && left.size(1) % 32 == 0 && hasAmxBf16()) {
    return DecodeShape::kRowsTimesWeight;
  }
  if (weight_transposed && rows <= kFewRows && hasFewRowsGemm()) return DecodeShape::kRowsTimesWeight;
  // bf16 rows beyond the first widen the matrix again each: a loss against oneDNN from 4 rows on.
  const int64_t max_matrix_rows = dtype == at::kFloat ? kFewRows : 1;
  if (right.is_contiguous() && rows <= max_matrix_rows) return DecodeShape::kRowsTimesMatrix;
  return DecodeShape::kNone;
}

template <typename T>
const T* dataOrNull(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<T>() : nullptr;
}

template <typename T>
void rowsTimesWeight(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias, at::Tensor& out) {
  const int64_t rows = left.size(0), K = left.size(1), N = right.size(1);
  // right is W^T: W [N, K] starts at right's data, rows K apart.
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (rows > 1 && K % 32 == 0 && hasAmxBf16()) {
      amxFewRowsTimesWeight(left.const_data_ptr<T>(), left.stride(0), rows, right.const_data_ptr<T>(),
                            dataOrNull<T>(bias), out.mutable_data_ptr<T>(), N, K);
      return;
    }
    if (rows == 1) {  // as fast as the tile unit at one row, and on every CPU
      bf16Gemv(right.const_data_ptr<T>(), left.const_data_ptr<T>(), dataOrNull<T>(bias), out.mutable_data_ptr<T>(),
               N, K);
      return;
    }
  }
  fewRowsTimesWeight(left.const_data_ptr<T>(), left.stride(0), rows, right.const_data_ptr<T>(), dataOrNull<T>(bias),
                     out.mutable_data_ptr<T>(), N, K);
}

}  // namespace

std::optional<at::Tensor> decodeProduct(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias) {
  const DecodeShape shape = decodeShapeOf(left, right, bias);
  if (shape == DecodeShape::kNone) return std::nullopt;
  at::Tensor out = at::empty({left.size(0), right.size(1)}, left.options());
  const bool bf16 = left.scalar_type() == at::kBFloat16;
  if (shape == DecodeShape::kRowsTimesWeight) {
    bf16 ? rowsTimesWeight<c10::BFloat16>(left, right, bias, out) : rowsTimesWeight<float>(left, right, bias, out);
  } else if (bf16) {
    rowsTimesMatrix(left.const_data_ptr<c10::BFloat16>(), left.stride(0), left.size(0),
                    right.const_data_ptr<c10::BFloat16>(), dataOrNull<c10::BFloat16>(bias),
                    out.mutable_data_ptr<c10::BFloat16>(), right.size(0), right.size(1));
  } else {
    rowsTimesMatrix(left.const_data_ptr<float>(), left.stride(0), left.size(0), right.const_data_ptr<float>(),
                    dataOrNull<float>(bias), out.mutable_data_ptr<float>(), right.size(0), right.size(1));
  }
  return out;
}

namespace {

// neuron::linear: F.linear for the graphs the neuron compile backend runs on
// the host (torch_neuronx/compile). Inductor would call a GEMM for a
// decode-shaped linear; this takes the device's streaming kernels.
at::Tensor hostLinear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  if (input.dim() >= 1 && weight.dim() == 2 && input.is_contiguous() && weight.is_contiguous() &&
      input.size(-1) == weight.size(1)) {
    const at::Tensor rows = input.reshape({-1, input.size(-1)});
    if (auto out = decodeProduct(rows, weight.t(), bias.value_or(at::Tensor()))) {
      std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
      sizes.back() = weight.size(0);
      return out->view(sizes);
    }
  }
  return at::linear(input, weight, bias);
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
