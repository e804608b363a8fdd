#include "aten/kernels/RowTimesMatrix.h"

#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

// y[c0:c1] = bias[c0:c1] + sum over k of x[k] * matrix[k, c0:c1], in fp32.
template <typename T>
void columnBand(const float* x, const T* matrix, const T* bias, T* y, int64_t K, int64_t N, int64_t c0, int64_t c1) {
  std::vector<float> acc(c1 - c0, 0.f);
  if (bias) {
    for (int64_t c = c0; c < c1; ++c) acc[c - c0] = static_cast<float>(bias[c]);
  }
  for (int64_t k = 0; k < K; ++k) axpyWidened(x[k], matrix + k * N + c0, acc.data(), c1 - c0);
  for (int64_t c = c0; c < c1; ++c) y[c] = static_cast<T>(acc[c - c0]);
}

template <typename T>
void streamRows(const T* x, const T* matrix, const T* bias, T* y, int64_t K, int64_t N) {
  const std::vector<float> xs(x, x + K);
  // Each helper takes a band of at least 256 columns (1 KiB of each fp32 row) and walks all rows.
  parallelRows(N, 256, [&](int64_t c0, int64_t c1) { columnBand(xs.data(), matrix, bias, y, K, N, c0, c1); });
}

}  // namespace

void rowTimesMatrix(const float* x, const float* matrix, const float* bias, float* y, int64_t K, int64_t N) {
  streamRows(x, matrix, bias, y, K, N);
}

void rowTimesMatrix(const c10::BFloat16* x, const c10::BFloat16* matrix, const c10::BFloat16* bias,
                    c10::BFloat16* y, int64_t K, int64_t N) {
  streamRows(x, matrix, bias, y, K, N);
}

}  // namespace torch_neuronx
