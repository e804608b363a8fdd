// y = W x (+ bias) for a bfloat16 weight W [N, K] (rows contiguous) and a
// bfloat16 vector x [K], accumulated in fp32 and rounded once. ATen's bf16
// matrix-vector product runs at a fraction of memory bandwidth here;
// decoding in bf16 is nothing but these.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// bias: N values, or nullptr.
void bf16Gemv(const c10::BFloat16* weight, const c10::BFloat16* x, const c10::BFloat16* bias, c10::BFloat16* y,
              int64_t rows, int64_t cols);

}  // namespace torch_neuronx
