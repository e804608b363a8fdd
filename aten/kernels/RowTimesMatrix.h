// y = x M (+ bias) for one row x [K] and a matrix M [K, N] stored row-major
// (x @ W with W kept [K, N], as GPT-2's Conv1D keeps it): M's rows are
// streamed once, scaled by x and summed in fp32, each helper thread over a
// band of columns.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// bias: N values, or nullptr.
void rowTimesMatrix(const float* x, const float* matrix, const float* bias, float* y, int64_t K, int64_t N);
void rowTimesMatrix(const c10::BFloat16* x, const c10::BFloat16* matrix, const c10::BFloat16* bias,
                    c10::BFloat16* y, int64_t K, int64_t N);

}  // namespace torch_neuronx
