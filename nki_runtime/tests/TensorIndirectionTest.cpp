#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::whole;

namespace {

// data [P, F] (HBM) -> tile; index [P, K] uint16; out [P, n] = the columns the index picks, copied on the
// Vector engine through a staging tile, as the tracer records tensor_copy(dst, tile.indirect(index, n)).
struct GatherProgram {
  ProgramBuilder b;
  int data, index, out, tile, offsets, staged, result;

  GatherProgram(int64_t P, int64_t F, int64_t K, int64_t n, float group = 16.f) {
    data = b.argument({P, F}), index = b.argument({P, K}, Dtype::kUInt16), out = b.argument({P, n});
    tile = b.tile(Memory::kSbuf, {P, F}), offsets = b.tile(Memory::kSbuf, {P, K}, Dtype::kUInt16);
    staged = b.tile(Memory::kSbuf, {P, n}), result = b.tile(Memory::kSbuf, {P, n});
    b.program().tensors[staged].staging = true;
    b.copy(whole(tile, {P, F}), whole(data, {P, F}));
    b.copy(whole(offsets, {P, K}), whole(index, {P, K}));
    b.emit(Opcode::kColumnGather, Engine::kVector, whole(staged, {P, n}), {whole(tile, {P, F}), whole(offsets, {P, K})})
        .coefficients = {group};
    b.emit(Opcode::kTensorCopy, Engine::kVector, whole(result, {P, n}), {whole(staged, {P, n})});
    b.copy(whole(out, {P, n}), whole(result, {P, n}));
  }
};

std::string firstViolation(Program& program, const CoreLimits& limits) {
  const auto violations = verify(program, limits);
  return violations.empty() ? "" : violations.front().message;
}

}  // namespace

TEST(TensorIndirection, EachGroupReadsItsOffsetsDownItsOwnIndexRows) {
  // 32 partitions, 20 columns: group 0 takes index rows 0-15 of column 0, then rows 0-3 of column 1; group 1
  // the same of rows 16-31. data[p, f] = 100 p + f.
  GatherProgram g(32, 40, 2, 20);
  ASSERT_EQ(firstViolation(g.b.program(), kNeuronCoreV4), "");
  std::vector<float> data(32 * 40), out(32 * 20, -1.f);
  for (int p = 0; p < 32; ++p) {
    for (int f = 0; f < 40; ++f) data[p * 40 + f] = 100.f * p + f;
  }
  std::vector<uint16_t> index(64);
  for (int r = 0; r < 32; ++r) {
    index[r * 2] = static_cast<uint16_t>(r < 16 ? 39 - r : r - 16);  // group 0: 39, 38, ...; group 1: 0, 1, ...
    index[r * 2 + 1] = static_cast<uint16_t>(r % 16 < 4 ? 20 + r % 16 : 0);
  }
  Executor(g.b.program()).run({data.data(), index.data(), out.data()});
  for (int p = 0; p < 32; ++p) {
    for (int i = 0; i < 20; ++i) {
      const int column = i < 16 ? (p < 16 ? 39 - i : i) : 20 + (i - 16);
      EXPECT_EQ(out[p * 20 + i], 100.f * p + column) << "partition " << p << ", column " << i;
    }
  }
}

TEST(TensorIndirection, AnOffsetPastTheDataThrows) {
  GatherProgram g(16, 8, 1, 2);
  std::vector<float> data(16 * 8, 1.f), out(16 * 2);
  std::vector<uint16_t> index(16, 0);
  index[1] = 8;
  EXPECT_THROW(Executor(g.b.program()).run({data.data(), index.data(), out.data()}), std::out_of_range);
}

TEST(TensorIndirection, ScatterWritesTheIndexedColumnsOnly) {
  ProgramBuilder b;
  const int values = b.argument({16, 3}), index = b.argument({16, 1}, Dtype::kUInt16), out = b.argument({16, 6});
  const int src = b.tile(Memory::kSbuf, {16, 3}), offsets = b.tile(Memory::kSbuf, {16, 1}, Dtype::kUInt16);
  const int target = b.tile(Memory::kSbuf, {16, 6});
  b.copy(whole(src, {16, 3}), whole(values, {16, 3}));
  b.copy(whole(offsets, {16, 1}), whole(index, {16, 1}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(target, {16, 6})).operand0.value = -1.f;
  b.emit(Opcode::kColumnScatter, Engine::kVector, whole(target, {16, 6}), {whole(src, {16, 3}), whole(offsets, {16, 1})})
      .coefficients = {16.f};
  b.copy(whole(out, {16, 6}), whole(target, {16, 6}));
  ASSERT_EQ(firstViolation(b.program(), kNeuronCoreV4), "");
  std::vector<float> v(48), result(96);
  std::iota(v.begin(), v.end(), 0.f);
  std::vector<uint16_t> idx(16, 0);
  idx[0] = 4, idx[1] = 1, idx[2] = 4;  // column 4 twice: the later (column 2) wins
  Executor(b.program()).run({v.data(), idx.data(), result.data()});
  for (int p = 0; p < 16; ++p) {
    EXPECT_EQ(std::vector<float>(result.begin() + 6 * p, result.begin() + 6 * p + 6),
              (std::vector<float>{-1.f, v[3 * p + 1], -1.f, -1.f, v[3 * p + 2], -1.f}))
        << "partition " << p;
  }
}

TEST(TensorIndirection, NeuronCoreV3HasNone) {
  GatherProgram g(16, 8, 1, 4);
  EXPECT_NE(firstViolation(g.b.program(), kNeuronCoreV3).find("NeuronCore-v4 (trn3) tensor indirection"),
            std::string::npos);
}

TEST(TensorIndirection, TooFewIndexColumnsOrARaggedLastGroupAreRefused) {
  GatherProgram few(16, 8, 1, 17);
  EXPECT_NE(firstViolation(few.b.program(), kNeuronCoreV4).find("num_elem 17 needs 2 index columns"),
            std::string::npos);
  GatherProgram ragged(24, 8, 1, 12);  // the group from partition 16 would read index rows up to 27
  EXPECT_NE(firstViolation(ragged.b.program(), kNeuronCoreV4).find("reads index rows up to 27"), std::string::npos)
      << firstViolation(ragged.b.program(), kNeuronCoreV4);
}

TEST(TensorIndirection, StagingTakesNoSbuf) {
  // Data of 200 KiB per partition: with its staged columns counted, it would not fit NeuronCore-v4's 256 KiB.
  GatherProgram g(16, 50 * 1024, 1, 16);
  EXPECT_EQ(firstViolation(g.b.program(), kNeuronCoreV4), "");
  g.b.program().tensors[g.staged].staging = false;
  g.b.program().tensors[g.staged].shape = {16, 20 * 1024};
  EXPECT_NE(firstViolation(g.b.program(), kNeuronCoreV4), "");
}
