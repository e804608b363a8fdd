#include <gtest/gtest.h>

#include <string>

#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::view;
using nki::testing::whole;

namespace {

std::string firstViolation(Program& program, const CoreLimits& limits = kNeuronCoreV3) {
  const auto violations = verify(program, limits);
  return violations.empty() ? "" : violations.front().message;
}

#define EXPECT_VIOLATION(program, text) EXPECT_NE(firstViolation(program).find(text), std::string::npos) \
    << firstViolation(program)

}  // namespace

TEST(Verifier, AValidProgramPasses) {
  ProgramBuilder b;
  const int in = b.argument({128, 512}), out = b.argument({128, 512});
  const int t = b.tile(Memory::kSbuf, {128, 512});
  b.copy(whole(t, {128, 512}), whole(in, {128, 512}));
  b.copy(whole(out, {128, 512}), whole(t, {128, 512}));
  EXPECT_EQ(firstViolation(b.program()), "");
}

TEST(Verifier, PartitionDimensionAtMost128) {
  ProgramBuilder b;
  const int in = b.argument({256, 4});
  const int t = b.tile(Memory::kSbuf, {256, 4});
  b.copy(whole(t, {256, 4}), whole(in, {256, 4}));
  EXPECT_VIOLATION(b.program(), "256 partitions");
}

TEST(Verifier, PsumTileIsOneBank) {
  ProgramBuilder b;
  const int t = b.tile(Memory::kPsum, {128, 1024});
  b.emit(Opcode::kMemset, Engine::kVector, whole(t, {128, 1024}));
  EXPECT_VIOLATION(b.program(), "one 2048-byte bank");
}

TEST(Verifier, MatmulLimitsAndMemories) {
  ProgramBuilder b;
  const int s = b.tile(Memory::kSbuf, {128, 128}), m = b.tile(Memory::kSbuf, {128, 1024});
  const int out = b.tile(Memory::kPsum, {128, 512});
  b.emit(Opcode::kMemset, Engine::kVector, whole(s, {128, 128}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(m, {128, 1024}));
  b.emit(Opcode::kMatmul, Engine::kTensor, whole(out, {128, 512}), {whole(s, {128, 128}), whole(m, {128, 1024})});
  EXPECT_VIOLATION(b.program(), "moving free size 1024 exceeds 512");

  ProgramBuilder c;
  const int s2 = c.tile(Memory::kSbuf, {128, 64}), m2 = c.tile(Memory::kSbuf, {128, 64});
  const int wrong = c.tile(Memory::kSbuf, {64, 64});
  c.emit(Opcode::kMatmul, Engine::kTensor, whole(wrong, {64, 64}), {whole(s2, {128, 64}), whole(m2, {128, 64})});
  EXPECT_VIOLATION(c.program(), "cannot write SBUF");
}

TEST(Verifier, MatmulDtypes) {
  ProgramBuilder b;
  const int s = b.tile(Memory::kSbuf, {128, 64}, Dtype::kBFloat16), m = b.tile(Memory::kSbuf, {128, 64});
  const int out = b.tile(Memory::kPsum, {64, 64});
  b.emit(Opcode::kMatmul, Engine::kTensor, whole(out, {64, 64}), {whole(s, {128, 64}), whole(m, {128, 64})});
  EXPECT_VIOLATION(b.program(), "both must have one dtype");
}

TEST(Verifier, ComputeEnginesCannotReadHbm) {
  ProgramBuilder b;
  const int in = b.argument({4, 4});
  const int t = b.tile(Memory::kSbuf, {4, 4});
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(t, {4, 4}), {whole(in, {4, 4})});
  EXPECT_VIOLATION(b.program(), "Vector engine cannot read HBM");
}

TEST(Verifier, OutOfBounds) {
  ProgramBuilder b;
  const int in = b.argument({4, 4});
  const int t = b.tile(Memory::kSbuf, {4, 4});
  b.copy(whole(t, {4, 4}), whole(in, {4, 4}, 4));
  EXPECT_VIOLATION(b.program(), "outside 't0'");
}

TEST(Verifier, SbufCapacityPerGeneration) {
  // Three live 80 KiB-per-partition tiles: 240 KiB fits a NeuronCore-v4 (256 KiB), not a v3 (224 KiB).
  ProgramBuilder b;
  int tiles[3];
  for (int& t : tiles) {
    t = b.tile(Memory::kSbuf, {128, 20480});
    b.emit(Opcode::kMemset, Engine::kVector, whole(t, {128, 20480}));
  }
  for (int t : tiles) b.emit(Opcode::kTensorCopy, Engine::kVector, whole(t, {128, 20480}), {whole(t, {128, 20480})});
  EXPECT_VIOLATION(b.program(), "live SBUF tensors need 245760 bytes");
  EXPECT_EQ(firstViolation(b.program(), kNeuronCoreV4), "");
}

TEST(Verifier, PsumBanks) {
  ProgramBuilder b;
  std::vector<int> tiles;
  for (int i = 0; i < 9; ++i) {
    tiles.push_back(b.tile(Memory::kPsum, {128, 512}));
    b.emit(Opcode::kMemset, Engine::kVector, whole(tiles.back(), {128, 512}));
  }
  for (int t : tiles) b.emit(Opcode::kTensorCopy, Engine::kVector, whole(t, {128, 512}), {whole(t, {128, 512})});
  EXPECT_VIOLATION(b.program(), "need 9 banks");
}

TEST(Verifier, LoopCarriedDependencyInAffineRange) {
  ProgramBuilder b;
  const int acc = b.tile(Memory::kSbuf, {4, 4}), x = b.tile(Memory::kSbuf, {4, 4});
  b.emit(Opcode::kMemset, Engine::kVector, whole(acc, {4, 4}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(x, {4, 4}));
  b.program().loop_nests = {{{0, 0}}, {{0, 1}}};
  for (int iteration = 0; iteration < 2; ++iteration) {
    Instruction& add =
        b.emit(Opcode::kTensorTensor, Engine::kVector, whole(acc, {4, 4}), {whole(acc, {4, 4}), whole(x, {4, 4})});
    add.op0 = AluOp::kMultiply;
    add.loops = iteration;
  }
  EXPECT_VIOLATION(b.program(), "loop-carried dependency");
  // The same as an accumulation is allowed.
  for (auto& in : b.program().instructions) in.accumulate = in.loops >= 0;
  EXPECT_EQ(firstViolation(b.program()), "");
}

TEST(Verifier, PartitionBroadcastOnlyByDma) {
  ProgramBuilder b;
  const int row = b.tile(Memory::kSbuf, {1, 8}), t = b.tile(Memory::kSbuf, {4, 8});
  b.emit(Opcode::kMemset, Engine::kVector, whole(row, {1, 8}));
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(t, {4, 8}), {view(row, 0, {{4, 0}, {8, 1}})});
  EXPECT_VIOLATION(b.program(), "broadcasts along the partition axis");
}

TEST(Verifier, DisjointBlocksOfOneTensorAreIndependent) {
  // Iteration n stores columns [4n, 4n + 4) of an [8, 8] output: interleaved extents, disjoint elements.
  ProgramBuilder b;
  const int out = b.argument({8, 8});
  const int t = b.tile(Memory::kSbuf, {8, 4});
  b.emit(Opcode::kMemset, Engine::kVector, whole(t, {8, 4}));
  b.program().loop_nests = {{{0, 0}}, {{0, 1}}};
  for (int n = 0; n < 2; ++n) b.copy(view(out, 4 * n, {{8, 8}, {4, 1}}), whole(t, {8, 4})).loops = n;
  EXPECT_EQ(firstViolation(b.program()), "");
  // Overlapping column blocks (columns 2..5 twice) are a dependency.
  b.program().instructions.back().dst = view(out, 2, {{8, 8}, {4, 1}});
  b.program().instructions[1].dst = view(out, 3, {{8, 8}, {4, 1}});
  EXPECT_VIOLATION(b.program(), "loop-carried dependency");
}

TEST(Verifier, GpSimdReachesSbufOnly) {
  // A partition reduction (GpSimd) from SBUF passes; from PSUM it is refused, naming both memories.
  for (Memory source : {Memory::kSbuf, Memory::kPsum}) {
    ProgramBuilder b;
    const int t = b.tile(source, {64, 32}), r = b.tile(Memory::kSbuf, {1, 32});
    b.emit(Opcode::kMemset, Engine::kVector, whole(t, {64, 32})).operand0.value = 1.f;
    b.emit(Opcode::kPartitionReduce, Engine::kGpSimd, whole(r, {1, 32}), {whole(t, {64, 32})}).op0 = AluOp::kAdd;
    if (source == Memory::kSbuf) {
      EXPECT_EQ(firstViolation(b.program()), "");
    } else {
      EXPECT_VIOLATION(b.program(), "the GpSimd engine cannot read PSUM");
    }
  }
}

TEST(Verifier, IndirectDmaWantsAnIntegerIndexTileWithOneIndexARow) {
  for (const bool integer : {false, true}) {
    ProgramBuilder b;
    const int table = b.argument({5, 3});
    const int64_t indices = integer ? 3 : 4;  // the integer tile is one short
    const int index = b.tile(Memory::kSbuf, {indices, 1}, integer ? Dtype::kInt32 : Dtype::kFloat32);
    const int rows = b.tile(Memory::kSbuf, {4, 3});
    Instruction& gather = b.copy(whole(rows, {4, 3}), view(table, 0, {{1, 3}, {3, 1}}));
    gather.inputs.push_back(whole(index, {indices, 1}));
    gather.indirect = true;
    if (integer) {
      EXPECT_VIOLATION(b.program(), "the index tile holds 3 indices for 4 rows along axis 0");
    } else {
      EXPECT_VIOLATION(b.program(), "the index tile is float32; int32 or uint32");
    }
  }
}

TEST(Verifier, AnAliasHoldsExactlyItsOwnersBytes) {
  ProgramBuilder b;
  const int in = b.argument({4, 4});
  const int tile = b.tile(Memory::kSbuf, {4, 4});
  const int words = b.tile(Memory::kSbuf, {4, 3}, Dtype::kUInt32);  // 12 bytes per partition of 16
  b.program().tensors[words].alias_of = tile;
  b.copy(whole(tile, {4, 4}), whole(in, {4, 4}));
  EXPECT_VIOLATION(b.program(), "is not the bytes of 't1' seen as uint32");
}
