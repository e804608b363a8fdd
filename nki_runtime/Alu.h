// The arithmetic of the engines, in fp32: ALU operators and activation functions.
#pragma once

#include "nki_runtime/Program.h"

namespace nki {

float apply(AluOp op, float a, float b);
float apply(Function function, float x);

// out[i] = a[i] op b[i] over n elements; a loop the compiler vectorises for the common operators.
void applyRow(AluOp op, const float* a, const float* b, float* out, int64_t n);
void applyRow(Function function, const float* x, float* out, int64_t n);

// `initial` op x[0] op x[1] ... op x[n - 1]. Sums, products, maxima and minima in eight interleaved
// partial results, which the compiler vectorises (a sum's rounding then differs from the sequential
// one as a Vector engine's may); other operators in order.
float reduceRow(AluOp op, const float* x, int64_t n, float initial);

}  // namespace nki
