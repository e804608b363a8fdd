// out = left W^T (+ bias) for a few left rows (batched decoding: x[M, K],
// M up to kFewRows) and a weight W [N, K] with contiguous rows. A general
// GEMM packs the weight into blocks before using it, which at a few rows
// costs more than the product; this kernel streams each weight row once and
// multiplies it with every left row while it is in the core's registers, as
// a bandwidth-bound NeuronCore kernel would. fp32 accumulation, one rounding.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// Up to a batch of 8 rows the streamed product beats the CPU's GEMM here
// (alone, 1.7x fp32 and 1.2x bf16 at 8 rows; less in benchmarks/bench_matmul.py,
// whose CPU GEMMs leave OpenBLAS's worker spinning on the other core). fp32
// would still gain at 16, but it sums in another order than the CPU's GEMM:
// products over a prompt keep the CPU's rounding, since chaotic models (HRM,
// Zamba) amplify the difference beyond fp32 tolerance over a forward pass.
constexpr int64_t kFewRows = 8;

// Whether the kernel runs on this CPU (it needs AVX2 and FMA; AVX-512 where there).
bool hasFewRowsGemm();

// left: M rows of K values, left_stride apart; weight: N rows of K; bias: N values or nullptr; out: [M, N].
void fewRowsTimesWeight(const float* left, int64_t left_stride, int64_t M, const float* weight, const float* bias,
                        float* out, int64_t N, int64_t K);
void fewRowsTimesWeight(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
                        const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K);

}  // namespace torch_neuronx
