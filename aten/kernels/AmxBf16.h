// bf16 products of a few rows with a weight on the CPU's AMX tile unit
// (Sapphire Rapids and later): out = left W^T (+ bias). One tile instruction
// multiplies a 16 x 32 block of the weight by 32 x 16 packed left values, so
// the product is bound by reading the weight, as on a NeuronCore, where the
// vector-unit kernel (FewRowsGemm) is bound by its multiply-adds at 4-8 rows.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// Up to this many left rows: one tile's 16 columns.
constexpr int64_t kAmxRows = 16;

// Whether the CPU has AMX-BF16, the OS granted this process the tile state,
// and TORCH_NEURONX_SIMD does not lower the level below it.
bool hasAmxBf16();

// left: M (<= kAmxRows) rows of K values, left_stride apart; weight: N rows of K; bias: N values or nullptr;
// out: [M, N] contiguous. K must be a multiple of 32.
void amxFewRowsTimesWeight(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
                           const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K);

}  // namespace torch_neuronx
