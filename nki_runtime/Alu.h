// The arithmetic of the engines, in fp32: ALU operators and activation functions.
#pragma once

#include "nki_runtime/Program.h"

namespace nki {

float apply(AluOp op, float a, float b);

// The floor remainder (b's sign, kFloorMod) from the truncated one r (a's sign, kMod) of a and b.
template <typename T>
T floorRemainder(T r, T b) {
  return r != T(0) && (r < T(0)) != (b < T(0)) ? r + b : r;
}
float apply(Function function, float x);

// out[i] = a[i] op b[i] over n elements; for the common operators and functions, loops vectorised for the
// SIMD level in use.
void applyRow(AluOp op, const float* a, const float* b, float* out, int64_t n);
void applyRow(Function function, const float* x, float* out, int64_t n);
// out[i] = a[i] op scalar, or scalar op a[i].
void applyRowScalar(AluOp op, const float* a, float scalar, float* out, int64_t n, bool scalar_first);
// out[i] = (a[i] op0 scalar) op1 b[i] (each operand on the other side if so told): scalar_tensor_tensor
// in one pass where both operators are adds or multiplies.
void applyRowScalarThenRow(AluOp op0, const float* a, float scalar, bool scalar_first, AluOp op1, const float* b,
                           bool b_first, float* out, int64_t n);

// `initial` op x[0] op x[1] ... op x[n - 1]. Sums, products, maxima and minima in eight interleaved
// partial results, which the compiler vectorises (a sum's rounding then differs from the sequential
// one as a Vector engine's may); other operators in order.
float reduceRow(AluOp op, const float* x, int64_t n, float initial);

}  // namespace nki
