// The engines on integers as integers, never through fp32: the ALU's bitvec operators (nl.bitwise_and,
// bitwise_or, bitwise_xor, left_shift, right_shift; nl.invert and nl.logical_not as an xor) on bit patterns
// in tensor_tensor, tensor_scalar and tensor_reduce; GpSimd's 32-bit integer arithmetic and iota; integer
// memsets.
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

bool isBitvec(AluOp op);
// a op b on the bits of integers, a's own width a_bits (shifts are logical: zeros come in).
int64_t applyBits(AluOp op, int64_t a, int64_t b, int a_bits);

// tensor_tensor / tensor_scalar whose operators are bitvec ones (the verifier lets only integer tiles in).
void bitvecTensorTensor(const Bound& b);
void bitvecTensorScalar(const Bound& b);

// tensor_tensor on GpSimd whose tiles are all int32 or uint32: native integer arithmetic, exact, sums and
// products wrapping (add, subtract, multiply, maximum, minimum and the comparisons; AWS's
// nki.isa.tensor_tensor). Other operators compute in fp32 as on the Vector engine.
bool takesNativeIntegers(const Bound& b);
void integerTensorTensor(const Bound& b);

// tensor_reduce with bitwise_and, bitwise_or or bitwise_xor over integer tiles, as bits.
void bitvecReduce(const Bound& b);

// iota in int32 arithmetic from its exact terms (Instruction::integers), as AWS documents it: an int32 or
// uint32 dst takes the values' bits, another dtype their conversion.
void integerIota(const Bound& b);

// memset of an integer dst to an integer immediate, exactly.
void integerMemset(const Bound& b);

}  // namespace nki
