// y = x M (+ bias) for a few rows x [R, K] and a matrix M [K, N] stored
// row-major (x @ W with W kept [K, N], as GPT-2's Conv1D keeps it): M's rows
// are streamed once, each scaled by every row of x and summed in fp32, each
// helper thread over a band of columns.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// Rows up to which this beats the CPU device's GEMM. Without AVX-512, 7-8 fp32 rows are bound by the
// multiply-adds, where the GEMM does better ([8, 768] against GPT-2's fp32 matrices from memory, Zen 5
// as AVX2: 31 ms against 27); bf16 GEMMs there are far slower (0.9 s).
int64_t maxRowsTimesMatrix(bool bf16);

// x: R rows of K values, x_stride apart; bias: N values, or nullptr; y: [R, N] contiguous.
void rowsTimesMatrix(const float* x, int64_t x_stride, int64_t R, const float* matrix, const float* bias, float* y,
                     int64_t K, int64_t N);
void rowsTimesMatrix(const c10::BFloat16* x, int64_t x_stride, int64_t R, const c10::BFloat16* matrix,
                     const c10::BFloat16* bias, c10::BFloat16* y, int64_t K, int64_t N);

}  // namespace torch_neuronx
