#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::whole;

namespace {

// coefficients for a collective of `kind` along `dim` over one rank-list {0, 1}.
std::vector<float> overTwoRanks(CollectiveKind kind, int dim) {
  return {static_cast<float>(kind), static_cast<float>(dim), 1.f, 2.f, 0.f, 1.f};
}

// A second rank whose data is this rank's plus 100: what a communicator of two ranks would return.
Communicator twoRanks(std::vector<std::vector<float>>& seen) {
  return [&seen](const std::vector<float>& coefficients, AluOp, Dtype, const std::vector<char>& sent) {
    std::vector<float> mine(sent.size() / sizeof(float));
    std::memcpy(mine.data(), sent.data(), sent.size());
    seen.push_back(mine);
    std::vector<float> received;
    if (static_cast<CollectiveKind>(coefficients[0]) == CollectiveKind::kAllGather) {
      received = mine;
      for (float v : mine) received.push_back(v + 100.f);
    } else {  // an all-reduce (add)
      for (float v : mine) received.push_back(2 * v + 100.f);
    }
    std::vector<char> bytes(received.size() * sizeof(float));
    std::memcpy(bytes.data(), received.data(), bytes.size());
    return bytes;
  };
}

}  // namespace

TEST(Collectives, AllGatherPlacesEachRankAlongTheFreeDim) {
  // A [2, 3] SBUF tile gathered along dim 1 into [2, 6]: rank 0's columns, then rank 1's.
  ProgramBuilder b;
  const int in = b.argument({2, 3}), out = b.argument({2, 6});
  const int tile = b.tile(Memory::kSbuf, {2, 3}), wide = b.tile(Memory::kSbuf, {2, 6});
  b.copy(whole(tile, {2, 3}), whole(in, {2, 3}));
  b.emit(Opcode::kCollective, Engine::kDma, whole(wide, {2, 6}), {whole(tile, {2, 3})}).coefficients =
      overTwoRanks(CollectiveKind::kAllGather, 1);
  b.copy(whole(out, {2, 6}), whole(wide, {2, 6}));
  ASSERT_TRUE(verify(b.program(), kNeuronCoreV3).empty());
  std::vector<float> x(6), y(12, -1.f);
  std::iota(x.begin(), x.end(), 0.f);
  std::vector<std::vector<float>> seen;
  const Communicator communicator = twoRanks(seen);
  Executor(b.program()).run({x.data(), y.data()}, 0, nullptr, &communicator);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], x);  // sent in row-major order
  const std::vector<float> expected = {0, 1, 2, 100, 101, 102, 3, 4, 5, 103, 104, 105};
  EXPECT_EQ(y, expected);
}

TEST(Collectives, AllReduceOfAStridedViewWritesBackInPlace) {
  // Column 1 of a [3, 2] HBM tensor, reduced in place: the other column stays.
  ProgramBuilder b;
  const int data = b.argument({3, 2});
  const Access column = nki::testing::view(data, 1, {{3, 2}, {1, 1}});
  b.emit(Opcode::kCollective, Engine::kDma, column, {column}).coefficients =
      overTwoRanks(CollectiveKind::kAllReduce, 0);
  b.program().instructions.back().op0 = AluOp::kAdd;
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  std::vector<std::vector<float>> seen;
  const Communicator communicator = twoRanks(seen);
  Executor(b.program()).run({x.data()}, 0, nullptr, &communicator);
  EXPECT_EQ(seen.at(0), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(x, (std::vector<float>{0, 102, 2, 106, 4, 110}));
}

TEST(Collectives, WithoutACommunicatorTheRunFails) {
  ProgramBuilder b;
  const int data = b.argument({1, 4});
  b.emit(Opcode::kCollective, Engine::kDma, whole(data, {1, 4}), {whole(data, {1, 4})}).coefficients =
      overTwoRanks(CollectiveKind::kAllReduce, 0);
  b.program().instructions.back().op0 = AluOp::kAdd;
  std::vector<float> x(4);
  EXPECT_THROW(Executor(b.program()).run({x.data()}), std::runtime_error);
}

TEST(Collectives, VerifierChecksMemoryDtypeAndShape) {
  const auto first = [](Program& program) {
    const auto found = verify(program, kNeuronCoreV3);
    return found.empty() ? std::string() : found[0].message;
  };
  {
    ProgramBuilder b;  // fp32 into bf16
    const int in = b.argument({2, 4}), out = b.argument({2, 4}, Dtype::kBFloat16);
    b.emit(Opcode::kCollective, Engine::kDma, whole(out, {2, 4}), {whole(in, {2, 4})}).coefficients =
        overTwoRanks(CollectiveKind::kAllReduce, 0);
    b.program().instructions.back().op0 = AluOp::kAdd;
    EXPECT_NE(first(b.program()).find("a collective does not cast"), std::string::npos) << first(b.program());
  }
  {
    ProgramBuilder b;  // a gather of two ranks into a dst no wider than src
    const int in = b.argument({2, 4}), out = b.argument({2, 4});
    b.emit(Opcode::kCollective, Engine::kDma, whole(out, {2, 4}), {whole(in, {2, 4})}).coefficients =
        overTwoRanks(CollectiveKind::kAllGather, 0);
    EXPECT_NE(first(b.program()).find("2 times its size along dim 0"), std::string::npos) << first(b.program());
  }
  {
    ProgramBuilder b;  // an all-to-all in SBUF
    const int in = b.tile(Memory::kSbuf, {2, 4}), out = b.tile(Memory::kSbuf, {2, 4});
    b.emit(Opcode::kCollective, Engine::kDma, whole(out, {2, 4}), {whole(in, {2, 4})}).coefficients =
        overTwoRanks(CollectiveKind::kAllToAll, 0);
    EXPECT_NE(first(b.program()).find("must be HBM"), std::string::npos) << first(b.program());
  }
}

TEST(Collectives, AllToAllVSendsCountedChunksAndPlacesWhatComesBack) {
  // Two members: this rank sends x[1:3] to member 0 and x[3:4] to member 1; member 1 (the communicator)
  // sends back three elements. With receive offsets (row 3: 5, 0), they land at 5 and 0; row 2 gets 2, 3.
  ProgramBuilder b;
  const int x = b.argument({1, 6}), out = b.argument({1, 8}), table = b.argument({4, 2}, Dtype::kUInt32);
  b.emit(Opcode::kCollective, Engine::kDma, whole(out, {1, 8}), {whole(x, {1, 6}), whole(table, {4, 2})})
      .coefficients = {static_cast<float>(CollectiveKind::kAllToAllV), static_cast<float>(kHasRecvDisplacements),
                       1.f, 2.f, 0.f, 1.f};
  ASSERT_TRUE(verify(b.program(), kNeuronCoreV3).empty());
  std::vector<float> values = {10, 11, 12, 13, 14, 15}, result(8, -1.f);
  std::vector<uint32_t> metadata = {2, 1, 1, 3, 0, 0, 5, 0};  // rows: counts, offsets, received, landing
  std::vector<char> sent_seen;
  const Communicator communicator = [&](const std::vector<float>&, AluOp, Dtype, const std::vector<char>& sent) {
    sent_seen = sent;
    std::vector<uint32_t> counts = {2, 3};
    std::vector<float> chunks = {11, 12, 20, 21, 22};  // member 0's (this rank's own) chunk, then member 1's
    std::vector<char> bytes(counts.size() * 4 + chunks.size() * 4);
    std::memcpy(bytes.data(), counts.data(), 8);
    std::memcpy(bytes.data() + 8, chunks.data(), chunks.size() * 4);
    return bytes;
  };
  Executor(b.program()).run({values.data(), result.data(), metadata.data()}, 0, nullptr, &communicator);
  std::vector<uint32_t> header(2);
  std::memcpy(header.data(), sent_seen.data(), 8);
  EXPECT_EQ(header, (std::vector<uint32_t>{2, 1}));
  std::vector<float> chunks(3);
  std::memcpy(chunks.data(), sent_seen.data() + 8, 12);
  EXPECT_EQ(chunks, (std::vector<float>{11, 12, 13}));
  EXPECT_EQ(result, (std::vector<float>{20, 21, 22, -1, -1, 11, 12, -1}));
  EXPECT_EQ(metadata, (std::vector<uint32_t>{2, 1, 1, 3, 2, 3, 5, 0}));
}
