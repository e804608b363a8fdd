// Runs of per-partition instructions replayed a few partitions at a time: which runs qualify, and
// results equal to the program order's.
#include <gtest/gtest.h>

#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Instructions.h"
#include "nki_runtime/PartitionStreams.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::view;
using nki::testing::whole;

namespace {

std::vector<PartitionStream> streamsOf(const Program& program) {
  std::vector<uint8_t> independent;
  for (const Instruction& in : program.instructions) independent.push_back(rowsIndependent(program, in));
  return planPartitionStreams(program, independent);
}

// x [P, F] -> out [P, F] = (x * x + x) * 3, through tiles that die and are born within the run: `a`
// dies at the sum, `wide` (twice a's row, so its partitions straddle a's) is born after it.
Program loadComputeStore(int64_t P, int64_t F) {
  ProgramBuilder b;
  const int x = b.argument({P, F}), out = b.argument({P, F});
  const int a = b.tile(Memory::kSbuf, {P, F}), sum = b.tile(Memory::kSbuf, {P, F});
  const int wide = b.tile(Memory::kSbuf, {P, 2 * F});
  b.copy(whole(a, {P, F}), whole(x, {P, F}));
  b.emit(Opcode::kTensorTensor, Engine::kVector, whole(sum, {P, F}), {whole(a, {P, F}), whole(a, {P, F})}).op0 =
      AluOp::kMultiply;
  b.emit(Opcode::kTensorTensor, Engine::kVector, whole(sum, {P, F}), {whole(sum, {P, F}), whole(a, {P, F})}).op0 =
      AluOp::kAdd;
  Instruction& triple = b.emit(Opcode::kTensorScalar, Engine::kVector, view(wide, 0, {{P, 2 * F}, {F, 1}}),
                               {whole(sum, {P, F})});
  triple.op0 = AluOp::kMultiply;
  triple.operand0.value = 3.f;
  b.copy(whole(out, {P, F}), view(wide, 0, {{P, 2 * F}, {F, 1}}));
  return b.program();
}

}  // namespace

TEST(PartitionStreams, LoadComputeStoreIsOneStream) {
  const auto streams = streamsOf(loadComputeStore(128, 64));
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0].first, 0);
  EXPECT_EQ(streams[0].count, 5);
  EXPECT_EQ(streams[0].partitions, 128);
}

TEST(PartitionStreams, OtherPartitionsTransposesAndRereadHbmEndAStream) {
  const int64_t P = 16, F = 32;
  ProgramBuilder b;
  const int x = b.argument({P, F}), y = b.argument({P, F});
  const int t = b.tile(Memory::kSbuf, {P, F}), u = b.tile(Memory::kSbuf, {P, F}), v = b.tile(Memory::kSbuf, {F, P});
  b.copy(whole(t, {P, F}), whole(x, {P, F}));                                                      // 0
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(u, {P, F}), {whole(t, {P, F})});                // 1
  // Row p reads partition p + 1 of t.
  b.emit(Opcode::kTensorCopy, Engine::kVector, view(u, 0, {{P - 1, F}, {F, 1}}),                     // 2
         {view(t, F, {{P - 1, F}, {F, 1}})});
  b.emit(Opcode::kTranspose, Engine::kTensor, whole(v, {F, P}), {whole(u, {P, F})});                 // 3
  b.copy(whole(y, {P, F}), whole(u, {P, F}));                                                      // 4
  b.copy(whole(t, {P, F}), whole(y, {P, F}));  // reads back what 4 wrote to HBM                     // 5
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(u, {P, F}), {whole(t, {P, F})});                // 6
  const auto streams = streamsOf(b.program());
  ASSERT_EQ(streams.size(), 2u);
  EXPECT_EQ(streams[0].first, 0);
  EXPECT_EQ(streams[0].count, 2);
  EXPECT_EQ(streams[1].first, 5);  // 4 alone: 5 rereads its HBM tensor
  EXPECT_EQ(streams[1].count, 2);
}

TEST(PartitionStreams, InterleavedPartitionsGiveTheProgramOrdersResults) {
  // 4,096 values a partition: a few partitions a step, so tiles of different instructions are in
  // flight together; tiles born and dead within the stream must not share arena space.
  const int64_t P = 128, F = 4096;
  std::vector<float> x(P * F), out(P * F, -1.f);
  for (int64_t i = 0; i < P * F; ++i) x[i] = static_cast<float>(i % 61) - 30.f;
  Executor(loadComputeStore(P, F)).run({x.data(), out.data()});
  for (int64_t i = 0; i < P * F; ++i) ASSERT_EQ(out[i], (x[i] * x[i] + x[i]) * 3.f) << i;  // exact small integers
}
