// y = x M (+ bias) for a few rows x [R, K] and a matrix M [K, N] stored
// row-major (x @ W with W kept [K, N], as GPT-2's Conv1D keeps it): M's rows
// are streamed once, each scaled by every row of x and summed in fp32, each
// helper thread over a band of columns.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// x: R rows of K values, x_stride apart; bias: N values, or nullptr; y: [R, N] contiguous.
void rowsTimesMatrix(const float* x, int64_t x_stride, int64_t R, const float* matrix, const float* bias, float* y,
                     int64_t K, int64_t N);
void rowsTimesMatrix(const c10::BFloat16* x, int64_t x_stride, int64_t R, const c10::BFloat16* matrix,
                     const c10::BFloat16* bias, c10::BFloat16* y, int64_t K, int64_t N);

}  // namespace torch_neuronx
