#include <gtest/gtest.h>

#include <cstdint>
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
