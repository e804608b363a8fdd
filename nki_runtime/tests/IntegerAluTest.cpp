// The engines on integers as integers (IntegerAlu.h): GpSimd's int32 arithmetic, iota's, integer memsets and
// bitvec reductions keep values past fp32's 24-bit mantissa.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::whole;

TEST(IntegerAlu, GpSimdAddsInt32TilesExactlyAndWraps) {
  ProgramBuilder b;
  const int x = b.argument({1, 4}, Dtype::kInt32), y = b.argument({1, 4}, Dtype::kInt32);
  const int out = b.argument({1, 4}, Dtype::kInt32);
  const int a = b.tile(Memory::kSbuf, {1, 4}, Dtype::kInt32), c = b.tile(Memory::kSbuf, {1, 4}, Dtype::kInt32);
  const int sum = b.tile(Memory::kSbuf, {1, 4}, Dtype::kInt32);
  b.copy(whole(a, {1, 4}), whole(x, {1, 4}));
  b.copy(whole(c, {1, 4}), whole(y, {1, 4}));
  b.emit(Opcode::kTensorTensor, Engine::kGpSimd, whole(sum, {1, 4}), {whole(a, {1, 4}), whole(c, {1, 4})}).op0 =
      AluOp::kAdd;
  b.copy(whole(out, {1, 4}), whole(sum, {1, 4}));
  std::vector<int32_t> left = {16777217, 2147483647, -5, 1 << 30}, right = {2, 1, -7, 1 << 30}, result(4, 0);
  Executor(b.program()).run({left.data(), right.data(), result.data()});
  // fp32 would give 16777220 and saturate the last two sums
  EXPECT_EQ(result, (std::vector<int32_t>{16777219, INT32_MIN, -12, INT32_MIN}));
}

TEST(IntegerAlu, IotaTakesItsExactTerms) {
  ProgramBuilder b;
  const int out = b.argument({2, 3}, Dtype::kInt32);
  const int tile = b.tile(Memory::kSbuf, {2, 3}, Dtype::kInt32);
  Instruction& iota = b.emit(Opcode::kIota, Engine::kGpSimd, whole(tile, {2, 3}));
  iota.integers = {16777217, 1000, 1};  // offset, per partition, per element
  iota.coefficients = {16777216.f, 1000.f, 1.f};  // what fp32 made of them
  b.copy(whole(out, {2, 3}), whole(tile, {2, 3}));
  std::vector<int32_t> result(6, 0);
  Executor(b.program()).run({result.data()});
  EXPECT_EQ(result, (std::vector<int32_t>{16777217, 16777218, 16777219, 16778217, 16778218, 16778219}));
}

TEST(IntegerAlu, IntegerMemsetAndBitwiseOrReduction) {
  ProgramBuilder b;
  const int out = b.argument({2, 1}, Dtype::kInt32);
  const int tile = b.tile(Memory::kSbuf, {2, 4}, Dtype::kInt32), reduced = b.tile(Memory::kSbuf, {2}, Dtype::kInt32);
  Instruction& fill = b.emit(Opcode::kMemset, Engine::kVector, whole(tile, {2, 4}));
  fill.operand0.integral = true;
  fill.operand0.bits = 0x7F00FF01;
  fill.operand0.value = static_cast<float>(0x7F00FF01);
  b.emit(Opcode::kTensorReduce, Engine::kVector, whole(reduced, {2}), {whole(tile, {2, 4})}).op0 = AluOp::kBitwiseOr;
  b.copy(whole(out, {2, 1}), whole(reduced, {2, 1}));
  std::vector<int32_t> result(2, 0);
  Executor(b.program()).run({result.data()});
  EXPECT_EQ(result, (std::vector<int32_t>{0x7F00FF01, 0x7F00FF01}));
}

