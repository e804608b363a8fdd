#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Microscaling.h"
#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::whole;

TEST(Microscaling, PackedValuesComeInByteAndNibbleOrder) {
  const uint8_t fp8[4] = {0x38, 0x40, 0xB8, 0x00};  // e4m3: 1, 2, -1, 0
  EXPECT_EQ(packedValue(reinterpret_cast<const char*>(fp8), Dtype::kFloat8E4M3x4, 0), 1.f);
  EXPECT_EQ(packedValue(reinterpret_cast<const char*>(fp8), Dtype::kFloat8E4M3x4, 1), 2.f);
  EXPECT_EQ(packedValue(reinterpret_cast<const char*>(fp8), Dtype::kFloat8E4M3x4, 2), -1.f);
  const uint8_t fp4[2] = {0xF1, 0x72};  // nibbles, low first: 0.5, -6, 1, 6
  const char* element = reinterpret_cast<const char*>(fp4);
  EXPECT_EQ(packedValue(element, Dtype::kFloat4E2M1x4, 0), 0.5f);
  EXPECT_EQ(packedValue(element, Dtype::kFloat4E2M1x4, 1), -6.f);
  EXPECT_EQ(packedValue(element, Dtype::kFloat4E2M1x4, 2), 1.f);
  EXPECT_EQ(packedValue(element, Dtype::kFloat4E2M1x4, 3), 6.f);
}

TEST(Microscaling, ScalesOfTallTilesSitInTheFirstFourPartitionsOfEachQuadrant) {
  EXPECT_EQ(scaleRow(3, 32), 3);
  EXPECT_EQ(scaleRow(4, 64), 32);
  EXPECT_EQ(scaleRow(5, 128), 33);
  EXPECT_EQ(scaleRow(15, 128), 99);
}

namespace {

// stationary [32, 1] and moving [32, 1] packed e4m3 with [4, 1] scales each, into a [1, 1] fp32 result.
Program matmulOfOneColumn() {
  ProgramBuilder b;
  const int s = b.argument({32, 1}, Dtype::kFloat8E4M3x4), m = b.argument({32, 1}, Dtype::kFloat8E4M3x4);
  const int ss = b.argument({4, 1}, Dtype::kUInt8), ms = b.argument({4, 1}, Dtype::kUInt8);
  const int out = b.argument({1, 1});
  std::vector<int> tiles;
  for (int t : {s, m, ss, ms}) {
    const auto shape = b.shape(t);
    const Dtype dtype = b.program().tensors[t].dtype;
    tiles.push_back(b.tile(Memory::kSbuf, shape, dtype));
    b.copy(whole(tiles.back(), shape), whole(t, shape));
  }
  const int result = b.tile(Memory::kPsum, {1, 1});
  b.emit(Opcode::kMatmulMx, Engine::kTensor, whole(result, {1, 1}),
         {whole(tiles[0], {32, 1}), whole(tiles[1], {32, 1}), whole(tiles[2], {4, 1}), whole(tiles[3], {4, 1})});
  const int copied = b.tile(Memory::kSbuf, {1, 1});
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(copied, {1, 1}), {whole(result, {1, 1})});
  b.copy(whole(out, {1, 1}), whole(copied, {1, 1}));
  return b.program();
}

}  // namespace

TEST(Microscaling, MatmulSumsPartitionsAndTheFourValuesWithTheirScales) {
  const Program program = matmulOfOneColumn();
  ASSERT_TRUE(verify(program, kNeuronCoreV4).empty());
  std::vector<uint8_t> ones(128, 0x38), twos(128, 0x40);  // every value 1 (stationary) and 2 (moving)
  std::vector<uint8_t> stationary_scales = {127, 128, 127, 127};  // group 1 doubled
  std::vector<uint8_t> moving_scales = {126, 126, 126, 126};      // halved
  float result = -1.f;
  Executor(program).run({ones.data(), twos.data(), stationary_scales.data(), moving_scales.data(), &result});
  // Per group: 8 partitions x 4 values of 1 x 2 x 0.5 = 32; group 1 twice that.
  EXPECT_EQ(result, 32.f + 64.f + 32.f + 32.f);
}

TEST(Microscaling, MatmulNeedsNeuronCoreV4) {
  const auto violations = verify(matmulOfOneColumn(), kNeuronCoreV3);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations[0].message.find("runs on NeuronCore-v4 (trn3) and newer"), std::string::npos)
      << violations[0].message;
}

TEST(Microscaling, QuantizeScalesEachGroupByItsLargestExponent) {
  // bf16 [32, 4]: all ones but a 3 in partition 0; e4m3 (emax 8).
  ProgramBuilder b;
  const int x = b.argument({32, 4}, Dtype::kBFloat16);
  const int data_out = b.argument({32, 1}, Dtype::kFloat8E4M3x4), scales_out = b.argument({4, 1}, Dtype::kUInt8);
  const int src = b.tile(Memory::kSbuf, {32, 4}, Dtype::kBFloat16);
  const int data = b.tile(Memory::kSbuf, {32, 1}, Dtype::kFloat8E4M3x4);
  const int scales = b.tile(Memory::kSbuf, {4, 1}, Dtype::kUInt8);
  b.copy(whole(src, {32, 4}), whole(x, {32, 4}));
  b.emit(Opcode::kQuantizeMxScales, Engine::kVector, whole(scales, {4, 1}), {whole(src, {32, 4})}).coefficients = {8};
  b.emit(Opcode::kQuantizeMx, Engine::kVector, whole(data, {32, 1}), {whole(src, {32, 4}), whole(scales, {4, 1})});
  b.copy(whole(data_out, {32, 1}), whole(data, {32, 1}));
  b.copy(whole(scales_out, {4, 1}), whole(scales, {4, 1}));
  ASSERT_TRUE(verify(b.program(), kNeuronCoreV4).empty());
  std::vector<uint16_t> values(128, 0x3F80);  // bf16 1.0
  values[0] = 0x4040;                          // bf16 3.0: fp32 exponent 128
  std::vector<uint8_t> packed(128), scale_codes(4);
  Executor(b.program()).run({values.data(), packed.data(), scale_codes.data()});
  // Twice the OCP scale: 2^(128 - 8 + 1 - 127) = 2^-6 for group 0, 2^-7 for the others.
  EXPECT_EQ(scale_codes, (std::vector<uint8_t>{121, 120, 120, 120}));
  const char* bytes = reinterpret_cast<const char*>(packed.data());
  EXPECT_EQ(packedValue(bytes, Dtype::kFloat8E4M3x4, 0), 192.f);  // 3 x 2^6
  EXPECT_EQ(packedValue(bytes, Dtype::kFloat8E4M3x4, 1), 64.f);
  EXPECT_EQ(packedValue(bytes + 4 * 8, Dtype::kFloat8E4M3x4, 0), 128.f);  // partition 8: group 1
}
