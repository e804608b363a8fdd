#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/Executor.h"
#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::whole;

namespace {

// A while loop on register 0 of an int32 argument, around nothing.
Program whileLoop(bool with_end) {
  ProgramBuilder b;
  const int registers = b.argument({1}, Dtype::kInt32);
  const Access condition = whole(registers, {1});
  b.emit(Opcode::kLoopBegin, Engine::kVector, condition, {condition}).coefficients = {0.f, 1.f};
  if (with_end) b.emit(Opcode::kLoopEnd, Engine::kVector, condition, {condition}).coefficients = {0.f, 0.f};
  return b.program();
}

}  // namespace

TEST(ControlFlow, AWhileLoopThatNeverEndsIsStopped) {
  const Program program = whileLoop(true);
  ASSERT_TRUE(verify(program, kNeuronCoreV3).empty());
  int32_t condition = 1;
  EXPECT_THROW(Executor(program).run({&condition}), std::runtime_error);
  condition = 0;  // a loop whose condition is zero never runs its body
  EXPECT_NO_THROW(Executor(program).run({&condition}));
}

TEST(ControlFlow, ALoopWithoutItsEndIsRefused) {
  const auto violations = verify(whileLoop(false), kNeuronCoreV3);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations[0].message.find("never ends"), std::string::npos) << violations[0].message;
}

TEST(ControlFlow, ScalarArithmeticIsThe32BitSequencers) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(scalarAlu(AluOp::kAdd, kMax, 1), kMin);  // wraps, never widens
  EXPECT_EQ(scalarAlu(AluOp::kMultiply, 100000, 100000), 1410065408);
  EXPECT_EQ(scalarAlu(AluOp::kSubtract, kMin, 1), kMax);
  EXPECT_EQ(scalarAlu(AluOp::kDivide, -17, 4), -4);  // toward zero
  EXPECT_EQ(scalarAlu(AluOp::kMod, -17, 4), -1);     // the dividend's sign
  EXPECT_EQ(scalarAlu(AluOp::kMod, 17, -4), 1);
  EXPECT_EQ(scalarAlu(AluOp::kDivide, kMin, -1), kMin);
  EXPECT_EQ(scalarAlu(AluOp::kMod, kMin, -1), 0);
  EXPECT_EQ(scalarAlu(AluOp::kMaximum, -3, 2), 2);
  EXPECT_EQ(scalarAlu(AluOp::kMinimum, -3, 2), -3);
  EXPECT_EQ(scalarAlu(AluOp::kLess, -3, 2), 1);
  EXPECT_EQ(scalarAlu(AluOp::kGreaterEqual, -3, 2), 0);
  EXPECT_EQ(scalarAlu(AluOp::kNotEqual, 7, 7), 0);
  EXPECT_THROW(scalarAlu(AluOp::kDivide, 1, 0), std::domain_error);
  EXPECT_THROW(scalarAlu(AluOp::kMod, 1, 0), std::domain_error);
  EXPECT_THROW(scalarAlu(AluOp::kPower, 2, 3), std::invalid_argument);
}

namespace {

// registers [condition, a, b, result]: if condition: result = a + b, else: result = a - b.
Program ifElse() {
  ProgramBuilder b;
  const int r = b.argument({4}, Dtype::kInt32);
  const Access condition = whole(r, {1}, 0), a = whole(r, {1}, 1), x = whole(r, {1}, 2), result = whole(r, {1}, 3);
  b.emit(Opcode::kBranch, Engine::kVector, condition, {condition}).coefficients = {3.f};
  b.emit(Opcode::kScalarAlu, Engine::kVector, result, {a, x}).op0 = AluOp::kAdd;
  b.emit(Opcode::kBranch, Engine::kVector, condition).coefficients = {4.f};
  b.emit(Opcode::kScalarAlu, Engine::kVector, result, {a, x}).op0 = AluOp::kSubtract;
  return b.program();
}

}  // namespace

TEST(ControlFlow, ABranchRunsOneSide) {
  const Program program = ifElse();
  ASSERT_TRUE(verify(program, kNeuronCoreV3).empty());
  const Executor executor(program);
  std::vector<int32_t> registers = {-5, 7, 3, 0};  // any nonzero condition takes the first side
  executor.run({registers.data()});
  EXPECT_EQ(registers[3], 10);
  registers = {0, 7, 3, 0};
  executor.run({registers.data()});
  EXPECT_EQ(registers[3], 4);
}

TEST(ControlFlow, ATileASkippedBranchWouldHaveWrittenReadsAsFresh) {
  ProgramBuilder b;
  const int r = b.argument({1}, Dtype::kInt32), out = b.argument({1, 1});
  const int tile = b.tile(Memory::kSbuf, {1, 1});
  const Access condition = whole(r, {1});
  b.emit(Opcode::kBranch, Engine::kVector, condition, {condition}).coefficients = {2.f};
  b.emit(Opcode::kMemset, Engine::kVector, whole(tile, {1, 1})).operand0.value = 5.f;
  b.copy(whole(out, {1, 1}), whole(tile, {1, 1}));
  const Executor executor(b.program());
  int32_t set = 1;
  float value = 0.f;
  executor.run({&set, &value});
  EXPECT_EQ(value, 5.f);
  set = 0;  // the arena still holds the 5 of the run before
  executor.run({&set, &value});
  EXPECT_TRUE(std::isnan(value)) << value;
}

TEST(ControlFlow, BranchesThatLeaveTheirPlaceAreRefused) {
  Program backward = ifElse();
  backward.instructions[2].coefficients = {1.f};
  auto violations = verify(backward, kNeuronCoreV3);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations[0].message.find("does not go forward"), std::string::npos) << violations[0].message;
  EXPECT_THROW(Executor{backward}, std::invalid_argument);

  ProgramBuilder b;  // a branch from a while loop's body to past its end
  const int r = b.argument({1}, Dtype::kInt32);
  const Access condition = whole(r, {1});
  b.emit(Opcode::kLoopBegin, Engine::kVector, condition, {condition}).coefficients = {0.f, 2.f};
  b.emit(Opcode::kBranch, Engine::kVector, condition).coefficients = {3.f};
  b.emit(Opcode::kLoopEnd, Engine::kVector, condition, {condition}).coefficients = {0.f, 0.f};
  b.emit(Opcode::kScalarAlu, Engine::kVector, condition, {condition, condition}).op0 = AluOp::kPower;
  violations = verify(b.program(), kNeuronCoreV3);
  ASSERT_EQ(violations.size(), 2u);
  EXPECT_NE(violations[0].message.find("jumps out of the body of the device loop"), std::string::npos)
      << violations[0].message;
  EXPECT_NE(violations[1].message.find("no other operator"), std::string::npos) << violations[1].message;
}
