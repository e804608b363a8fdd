#include "aten/kernels/RowTimesMatrix.h"

#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

// y[r, c0:c1] = bias[c0:c1] + sum over k of x[r, k] * matrix[k, c0:c1], in fp32.
template <typename T>
void columnBand(const float* x, int64_t R, const T* matrix, const T* bias, T* y, int64_t K, int64_t N, int64_t c0,
                int64_t c1) {
  const int64_t width = c1 - c0;
  std::vector<float> acc(R * width, 0.f);
  for (int64_t r = 0; r < R && bias; ++r) {
    for (int64_t c = c0; c < c1; ++c) acc[r * width + c - c0] = static_cast<float>(bias[c]);
  }
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t r = 0; r < R; ++r) axpyWidened(x[r * K + k], matrix + k * N + c0, acc.data() + r * width, width);
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = c0; c < c1; ++c) y[r * N + c] = static_cast<T>(acc[r * width + c - c0]);
  }
}

template <typename T>
void streamRows(const T* x, int64_t x_stride, int64_t R, const T* matrix, const T* bias, T* y, int64_t K,
                int64_t N) {
  std::vector<float> xs(R * K);  // the rows widened once, next to each other
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < K; ++k) xs[r * K + k] = static_cast<float>(x[r * x_stride + k]);
  }
  // Each helper takes a band of at least 256 columns (1 KiB of each fp32 row) and walks all rows.
  parallelRows(N, 256, [&](int64_t c0, int64_t c1) { columnBand(xs.data(), R, matrix, bias, y, K, N, c0, c1); });
}

}  // namespace

void rowsTimesMatrix(const float* x, int64_t x_stride, int64_t R, const float* matrix, const float* bias, float* y,
                     int64_t K, int64_t N) {
  streamRows(x, x_stride, R, matrix, bias, y, K, N);
}

void rowsTimesMatrix(const c10::BFloat16* x, int64_t x_stride, int64_t R, const c10::BFloat16* matrix,
                     const c10::BFloat16* bias, c10::BFloat16* y, int64_t K, int64_t N) {
  streamRows(x, x_stride, R, matrix, bias, y, K, N);
}

}  // namespace torch_neuronx
