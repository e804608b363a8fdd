// The arithmetic of the engines, in fp32: ALU operators and activation functions.
#pragma once

#include "nki_runtime/Program.h"

namespace nki {

float apply(AluOp op, float a, float b);
float apply(Function function, float x);

// out[i] = a[i] op b[i] over n elements; a loop the compiler vectorises for the common operators.
void applyRow(AluOp op, const float* a, const float* b, float* out, int64_t n);
void applyRow(Function function, const float* x, float* out, int64_t n);

}  // namespace nki
