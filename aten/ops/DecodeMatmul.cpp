#include "aten/ops/DecodeMatmul.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <torch/library.h>

#include <type_traits>
#include <vector>

#include "aten/kernels/AmxBf16.h"
#include "aten/kernels/FewRowsGemm.h"
#include "aten/kernels/RowTimesMatrix.h"

namespace torch_neuronx {
namespace {

// The kernel that computes a decode-shaped product, chosen once from the shapes.
enum class DecodeKernel { kNone, kAmxBf16, kFewRows, kRowsTimesMatrix };

DecodeKernel chooseKernel(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias) {
  if (left.dim() != 2 || right.dim() != 2 || left.size(1) != right.size(0) || left.size(0) < 1) {
    return DecodeKernel::kNone;
  }
  const auto dtype = left.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kBFloat16) || right.scalar_type() != dtype) {
    return DecodeKernel::kNone;
  }
  if (bias.defined() && (bias.scalar_type() != dtype || bias.dim() != 1 || bias.size(0) != right.size(1) ||
                         !bias.is_contiguous())) {
    return DecodeKernel::kNone;
  }
  const int64_t rows = left.size(0);
  const bool bf16 = dtype == at::kBFloat16;
  if (right.stride(0) == 1 && right.stride(1) == right.size(0)) {  // W^T of a contiguous weight W [N, K]
    // One row gains nothing from the tile unit: the streamed kernel reads the weight as fast.
    if (bf16 && rows >= 2 && rows <= kAmxRows && left.size(1) % 32 == 0 && hasAmxBf16()) {
      return DecodeKernel::kAmxBf16;
    }
    if (rows <= kFewRows && hasFewRowsGemm()) return DecodeKernel::kFewRows;
    return DecodeKernel::kNone;
  }
  if (right.is_contiguous() && rows <= maxRowsTimesMatrix(bf16)) return DecodeKernel::kRowsTimesMatrix;
  return DecodeKernel::kNone;
}

template <typename T>
const T* dataOrNull(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<T>() : nullptr;
}

template <typename T>
void runKernel(DecodeKernel kernel, const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias,
               at::Tensor& out) {
  const int64_t rows = left.size(0), K = left.size(1), N = right.size(1);
  const T* x = left.const_data_ptr<T>();
  const T* matrix = right.const_data_ptr<T>();  // for W^T: W [N, K] starts here, rows K apart
  T* y = out.mutable_data_ptr<T>();
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (kernel == DecodeKernel::kAmxBf16) {
      return amxFewRowsTimesWeight(x, left.stride(0), rows, matrix, dataOrNull<T>(bias), y, N, K);
    }
  }
  if (kernel == DecodeKernel::kFewRows) {
    return fewRowsTimesWeight(x, left.stride(0), rows, matrix, dataOrNull<T>(bias), y, N, K);
  }
  rowsTimesMatrix(x, left.stride(0), rows, matrix, dataOrNull<T>(bias), y, K, N);
}

// Left rows of any strides take the same kernel, packed first (at most kFewRows rows): a product's
// result must not depend on its operands' layout. Sent to the CPU GEMM instead, a strided view of the
// same rows summed in another order (test_modules.py's non-contiguous Transformer tests: parameter
// gradients 1e-5 apart where the CPU device's agree bit for bit).
void run(DecodeKernel kernel, const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias,
         at::Tensor& out) {
  const at::Tensor rows = left.stride(1) == 1 ? left : left.contiguous();
  if (left.scalar_type() == at::kBFloat16) {
    runKernel<c10::BFloat16>(kernel, rows, right, bias, out);
  } else {
    runKernel<float>(kernel, rows, right, bias, out);
  }
}

}  // namespace

std::optional<at::Tensor> decodeProduct(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias) {
  const DecodeKernel kernel = chooseKernel(left, right, bias);
  if (kernel == DecodeKernel::kNone) return std::nullopt;
  at::Tensor out = at::empty({left.size(0), right.size(1)}, left.options());
  run(kernel, left, right, bias, out);
  return out;
}

bool decodeProductInto(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias, at::Tensor& out) {
  const DecodeKernel kernel = chooseKernel(left, right, bias);
  if (kernel == DecodeKernel::kNone || out.scalar_type() != left.scalar_type() || out.dim() != 2 ||
      out.size(0) != left.size(0) || out.size(1) != right.size(1) || !out.is_contiguous()) {
    return false;
  }
  run(kernel, left, right, bias, out);
  return true;
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
