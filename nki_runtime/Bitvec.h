// The ALU's bitvec operators (nl.bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift; nl.invert
// and nl.logical_not as an xor): integer elements taken as bit patterns, never through fp32, for
// tensor_tensor and tensor_scalar.
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

bool isBitvec(AluOp op);
// a op b on the bits of integers, a's own width a_bits (shifts are logical: zeros come in).
int64_t applyBits(AluOp op, int64_t a, int64_t b, int a_bits);

// tensor_tensor / tensor_scalar whose operators are bitvec ones (the verifier lets only integer tiles in).
void bitvecTensorTensor(const Bound& b);
void bitvecTensorScalar(const Bound& b);

}  // namespace nki
