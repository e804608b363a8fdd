#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Verifier.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::view;
using nki::testing::whole;

TEST(Executor, LoadAddStoreThroughSbuf) {
  ProgramBuilder b;
  const int a = b.argument({4, 8}), c = b.argument({4, 8}), out = b.argument({4, 8});
  const int ta = b.tile(Memory::kSbuf, {4, 8}), tc = b.tile(Memory::kSbuf, {4, 8}), ts = b.tile(Memory::kSbuf, {4, 8});
  b.copy(whole(ta, {4, 8}), whole(a, {4, 8}));
  b.copy(whole(tc, {4, 8}), whole(c, {4, 8}));
  b.emit(Opcode::kTensorTensor, Engine::kVector, whole(ts, {4, 8}), {whole(ta, {4, 8}), whole(tc, {4, 8})}).op0 =
      AluOp::kAdd;
  b.copy(whole(out, {4, 8}), whole(ts, {4, 8}));
  std::vector<float> x(32), y(32), z(32, -1.f);
  std::iota(x.begin(), x.end(), 0.f);
  std::iota(y.begin(), y.end(), 100.f);
  Executor(b.program()).run({x.data(), y.data(), z.data()});
  for (int i = 0; i < 32; ++i) EXPECT_EQ(z[i], x[i] + y[i]);
}

TEST(Executor, DmaCastsBetweenDtypes) {
  // fp32 -> bf16 tile -> fp32: the DMA rounds to nearest, ties to even, as a compute-engine copy does.
  ProgramBuilder b;
  const int in = b.argument({1, 4}), out = b.argument({1, 4});
  const int t = b.tile(Memory::kSbuf, {1, 4}, Dtype::kBFloat16);
  b.copy(whole(t, {1, 4}), whole(in, {1, 4}));
  b.copy(whole(out, {1, 4}), whole(t, {1, 4}));
  const float tie_down = 1.f + std::ldexp(1.f, -8), tie_up = 1.f + 3 * std::ldexp(1.f, -8);
  std::vector<float> x = {tie_down, tie_up, 3.f, -2.5f}, y(4, 0.f);
  Executor(b.program()).run({x.data(), y.data()});
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 1.f + std::ldexp(1.f, -6));
  EXPECT_EQ(y[2], 3.f);
  EXPECT_EQ(y[3], -2.5f);
}

TEST(Executor, MatmulAccumulatesTransposedStationary) {
  // out[M=2, N=3] = s[K=4, M]^T @ m[K, N], twice accumulated.
  ProgramBuilder b;
  const int s = b.argument({4, 2}), m = b.argument({4, 3}), out = b.argument({2, 3});
  const int ts = b.tile(Memory::kSbuf, {4, 2}), tm = b.tile(Memory::kSbuf, {4, 3});
  const int acc = b.tile(Memory::kPsum, {2, 3}), res = b.tile(Memory::kSbuf, {2, 3});
  b.copy(whole(ts, {4, 2}), whole(s, {4, 2}));
  b.copy(whole(tm, {4, 3}), whole(m, {4, 3}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(acc, {2, 3})).operand0.value = 0.f;
  for (int repeat = 0; repeat < 2; ++repeat) {
    b.emit(Opcode::kMatmul, Engine::kTensor, whole(acc, {2, 3}), {whole(ts, {4, 2}), whole(tm, {4, 3})})
        .accumulate = true;
  }
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(res, {2, 3}), {whole(acc, {2, 3})});
  b.copy(whole(out, {2, 3}), whole(res, {2, 3}));
  std::vector<float> sv = {1, 2, 3, 4, 5, 6, 7, 8}, mv = {1, 0, 2, 0, 1, 0, 3, 1, 1, -1, 0, 2}, ov(6);
  Executor(b.program()).run({sv.data(), mv.data(), ov.data()});
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      float expected = 0;
      for (int k = 0; k < 4; ++k) expected += sv[k * 2 + i] * mv[k * 3 + j];
      EXPECT_EQ(ov[i * 3 + j], 2 * expected) << i << "," << j;
    }
  }
}

TEST(Executor, ReduceTransposeAndActivation) {
  ProgramBuilder b;
  const int in = b.argument({3, 5}), sums = b.argument({3}), transposed = b.argument({5, 3});
  const int t = b.tile(Memory::kSbuf, {3, 5}), r = b.tile(Memory::kSbuf, {3}), e = b.tile(Memory::kSbuf, {3, 5});
  const int tt = b.tile(Memory::kPsum, {5, 3}), ts = b.tile(Memory::kSbuf, {5, 3});
  b.copy(whole(t, {3, 5}), whole(in, {3, 5}));
  Instruction& act = b.emit(Opcode::kActivation, Engine::kScalar, whole(e, {3, 5}), {whole(t, {3, 5})});
  act.function = Function::kExp;
  act.op0 = AluOp::kMultiply;
  act.operand0.value = 2.f;  // scale
  act.op1 = AluOp::kAdd;
  act.operand1.value = 0.f;
  Instruction& sum = b.emit(Opcode::kTensorReduce, Engine::kVector, whole(r, {3}), {whole(e, {3, 5})});
  sum.op0 = AluOp::kAdd;
  sum.reduce_axes = 1;
  b.copy(whole(sums, {3}), whole(r, {3}));
  b.emit(Opcode::kTranspose, Engine::kTensor, whole(tt, {5, 3}), {whole(t, {3, 5})});
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(ts, {5, 3}), {whole(tt, {5, 3})});
  b.copy(whole(transposed, {5, 3}), whole(ts, {5, 3}));
  std::vector<float> x(15), s(3), tr(15);
  for (int i = 0; i < 15; ++i) x[i] = 0.1f * i;
  Executor(b.program()).run({x.data(), s.data(), tr.data()});
  for (int p = 0; p < 3; ++p) {
    double expected = 0;
    for (int f = 0; f < 5; ++f) expected += std::exp(2.0 * x[p * 5 + f]);
    EXPECT_NEAR(s[p], expected, 1e-4 * expected);
    for (int f = 0; f < 5; ++f) EXPECT_EQ(tr[f * 3 + p], x[p * 5 + f]);
  }
}

TEST(Executor, ActivationStagesAndPreluSlopePerPartition) {
  // activate2's form: prelu(imm0 - x) with imm0 = 1 (reversed subtract) and partition p's slope = slopes[p].
  ProgramBuilder b;
  const int in = b.argument({2, 3}), slopes = b.argument({2, 1}), out = b.argument({2, 3});
  const int t = b.tile(Memory::kSbuf, {2, 3}), ts = b.tile(Memory::kSbuf, {2, 1}), r = b.tile(Memory::kSbuf, {2, 3});
  b.copy(whole(t, {2, 3}), whole(in, {2, 3}));
  b.copy(whole(ts, {2, 1}), whole(slopes, {2, 1}));
  Access spread = whole(ts, {2, 3});
  spread.strides = {1, 0};  // the partition's one slope along its row
  Instruction& act = b.emit(Opcode::kActivation, Engine::kScalar, whole(r, {2, 3}), {whole(t, {2, 3}), spread});
  act.function = Function::kPrelu;
  act.op0 = AluOp::kSubtract;
  act.reverse0 = true;
  act.operand0.value = 1.f;
  act.operand2.input = 1;
  b.copy(whole(out, {2, 3}), whole(r, {2, 3}));
  std::vector<float> x = {0.f, 2.f, 3.f, -1.f, 1.f, 5.f}, slope = {0.5f, 0.25f}, y(6);
  Executor(b.program()).run({x.data(), slope.data(), y.data()});
  const std::vector<float> expected = {1.f, -0.5f, -1.f, 2.f, 0.f, -1.f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(Executor, ReadBeforeWriteSeesNaN) {
  ProgramBuilder b;
  const int out = b.argument({2, 4});
  const int t = b.tile(Memory::kSbuf, {2, 4});
  b.copy(whole(out, {2, 4}), whole(t, {2, 4}));  // t never written
  std::vector<float> o(8, 1.f);
  Executor(b.program()).run({o.data()});
  for (float v : o) EXPECT_TRUE(std::isnan(v));
}

TEST(Executor, TilesOfDisjointLifetimesShareTheArena) {
  ProgramBuilder b;
  const int in = b.argument({128, 512}), out = b.argument({128, 512});
  for (int i = 0; i < 10; ++i) {  // the iterations of an affine loop, as the tracer records them
    const int t = b.tile(Memory::kSbuf, {128, 512});
    b.copy(whole(t, {128, 512}), whole(in, {128, 512})).loops = i;
    b.copy(whole(out, {128, 512}), whole(t, {128, 512})).loops = i;
    b.program().loop_nests.push_back({LoopIteration{0, i}});
  }
  Executor executor(b.program());
  EXPECT_EQ(executor.arenaBytes(), 128 * 512 * 4);
}

TEST(Executor, StridedViewsAndBf16Conversion) {
  // Load every other column of a bf16 HBM matrix, convert to fp32 on the Vector engine.
  ProgramBuilder b;
  const int in = b.argument({2, 6}, Dtype::kBFloat16), out = b.argument({2, 3});
  const int t = b.tile(Memory::kSbuf, {2, 3}, Dtype::kBFloat16), f = b.tile(Memory::kSbuf, {2, 3});
  b.copy(whole(t, {2, 3}), view(in, 1, {{2, 6}, {3, 2}}));
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(f, {2, 3}), {whole(t, {2, 3})});
  b.copy(whole(out, {2, 3}), whole(f, {2, 3}));
  std::vector<uint16_t> x(12);
  for (int i = 0; i < 12; ++i) nki::fromFloat(static_cast<float>(i), &x[i], Dtype::kBFloat16);
  std::vector<float> o(6);
  Executor(b.program()).run({x.data(), o.data()});
  EXPECT_EQ(o, (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST(Executor, ScanAndIota) {
  ProgramBuilder b;
  const int out = b.argument({2, 4}), idx = b.argument({2, 4});
  const int ones = b.tile(Memory::kSbuf, {2, 4}), zeros = b.tile(Memory::kSbuf, {2, 4});
  const int s = b.tile(Memory::kSbuf, {2, 4}), io = b.tile(Memory::kSbuf, {2, 4});
  b.emit(Opcode::kMemset, Engine::kVector, whole(ones, {2, 4})).operand0.value = 1.f;
  b.emit(Opcode::kMemset, Engine::kVector, whole(zeros, {2, 4})).operand0.value = 0.f;
  Instruction& scan = b.emit(Opcode::kTensorTensorScan, Engine::kVector, whole(s, {2, 4}),
                             {whole(ones, {2, 4}), whole(zeros, {2, 4})});
  scan.op0 = AluOp::kAdd;  // running count
  scan.op1 = AluOp::kAdd;
  scan.operand0.value = 10.f;
  b.emit(Opcode::kIota, Engine::kGpSimd, whole(io, {2, 4})).coefficients = {5.f, 100.f, 2.f};
  b.copy(whole(out, {2, 4}), whole(s, {2, 4}));
  b.copy(whole(idx, {2, 4}), whole(io, {2, 4}));
  std::vector<float> o(8), ix(8);
  Executor(b.program()).run({o.data(), ix.data()});
  EXPECT_EQ(o, (std::vector<float>{11, 12, 13, 14, 11, 12, 13, 14}));
  EXPECT_EQ(ix, (std::vector<float>{5, 7, 9, 11, 105, 107, 109, 111}));
}

namespace {

// HBM [K, M] and [K, N] through SBUF into one nc_matmul, evicted PSUM -> SBUF -> HBM [M, N] fp32.
Program matmulProgram(int64_t K, int64_t M, int64_t N, Dtype dtype) {
  ProgramBuilder b;
  const int s = b.argument({K, M}, dtype), m = b.argument({K, N}, dtype), out = b.argument({M, N});
  const int ts = b.tile(Memory::kSbuf, {K, M}, dtype), tm = b.tile(Memory::kSbuf, {K, N}, dtype);
  const int acc = b.tile(Memory::kPsum, {M, N}), res = b.tile(Memory::kSbuf, {M, N});
  b.copy(whole(ts, {K, M}), whole(s, {K, M}));
  b.copy(whole(tm, {K, N}), whole(m, {K, N}));
  b.emit(Opcode::kMatmul, Engine::kTensor, whole(acc, {M, N}), {whole(ts, {K, M}), whole(tm, {K, N})});
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(res, {M, N}), {whole(acc, {M, N})});
  b.copy(whole(out, {M, N}), whole(res, {M, N}));
  return b.program();
}

}  // namespace

TEST(Executor, MatmulBlocksAndEdgesAgreeWithADirectSum) {
  // M = 7 and N = 70: one block of 4 rows by 64 columns, and edges on both sides.
  const int K = 5, M = 7, N = 70;
  std::vector<float> sv(K * M), mv(K * N), ov(M * N);
  for (int i = 0; i < K * M; ++i) sv[i] = static_cast<float>((i * 7) % 11) - 5.f;
  for (int i = 0; i < K * N; ++i) mv[i] = static_cast<float>((i * 5) % 13) - 6.f;
  Executor(matmulProgram(K, M, N, Dtype::kFloat32)).run({sv.data(), mv.data(), ov.data()});
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float expected = 0;
      for (int k = 0; k < K; ++k) expected += sv[k * M + i] * mv[k * N + j];
      ASSERT_EQ(ov[i * N + j], expected) << i << "," << j;
    }
  }
}

TEST(Executor, Bf16MatmulWithPairProductsAgreesWithFp32) {
  // Odd K and M, N past one block of 64: the paired path's edges (when the CPU has AVX512-BF16).
  const int K = 7, M = 9, N = 70;
  std::vector<uint16_t> sb(K * M), mb(K * N);
  std::vector<float> sf(K * M), mf(K * N), from_bf16(M * N), from_fp32(M * N);
  for (int i = 0; i < K * M; ++i) sf[i] = static_cast<float>((i * 7) % 11) - 5.f;
  for (int i = 0; i < K * N; ++i) mf[i] = static_cast<float>((i * 5) % 13) * 0.5f - 3.f;
  for (int i = 0; i < K * M; ++i) nki::fromFloat(sf[i], &sb[i], Dtype::kBFloat16);
  for (int i = 0; i < K * N; ++i) nki::fromFloat(mf[i], &mb[i], Dtype::kBFloat16);
  Executor(matmulProgram(K, M, N, Dtype::kBFloat16)).run({sb.data(), mb.data(), from_bf16.data()});
  Executor(matmulProgram(K, M, N, Dtype::kFloat32)).run({sf.data(), mf.data(), from_fp32.data()});
  EXPECT_EQ(from_bf16, from_fp32);  // small exact values: every product and sum is exact either way
}

void expectBf16MatmulAgreesWithFp32(int K, int M, int N) {
  std::vector<uint16_t> sb(K * M), mb(K * N);
  std::vector<float> sf(K * M), mf(K * N), from_bf16(M * N), from_fp32(M * N);
  for (int i = 0; i < K * M; ++i) sf[i] = static_cast<float>((i * 7) % 11) - 5.f;
  for (int i = 0; i < K * N; ++i) mf[i] = static_cast<float>((i * 5) % 13) * 0.5f - 3.f;
  for (int i = 0; i < K * M; ++i) nki::fromFloat(sf[i], &sb[i], Dtype::kBFloat16);
  for (int i = 0; i < K * N; ++i) nki::fromFloat(mf[i], &mb[i], Dtype::kBFloat16);
  Executor(matmulProgram(K, M, N, Dtype::kBFloat16)).run({sb.data(), mb.data(), from_bf16.data()});
  Executor(matmulProgram(K, M, N, Dtype::kFloat32)).run({sf.data(), mf.data(), from_fp32.data()});
  EXPECT_EQ(from_bf16, from_fp32) << K << " x " << M << " x " << N;  // products and sums below 2^24: exact
}

TEST(Executor, Bf16MatmulOfWholeTilesAgreesWithFp32) {
  // M and N multiples of 16 (the tile unit's sums land in PSUM directly where the CPU has AMX), an odd
  // number of 16-row and 16-column tiles, and K of 4.5 tile steps.
  expectBf16MatmulAgreesWithFp32(144, 48, 80);
  // The tutorial's whole tiles: the stationary packed by 16 x 16 transpositions (K a multiple of 32), sums
  // 2 KiB apart (PSUM partitions, summed 16 rows at a time); then rows 192 bytes apart (32 at a time).
  expectBf16MatmulAgreesWithFp32(128, 128, 512);
  expectBf16MatmulAgreesWithFp32(64, 32, 48);
}

TEST(Executor, LargeHbmStoreBypassingCachesKeepsEveryValue) {
  // 16.8 MB: stores that bypass the caches; rows of an odd length start unaligned and end in a tail.
  const int64_t P = 128, F = 32771;
  ProgramBuilder b;
  const int in = b.argument({P, F}), out = b.argument({P, F});
  const int t = b.tile(Memory::kSbuf, {P, F});
  b.copy(whole(t, {P, F}), whole(in, {P, F}));
  b.copy(whole(out, {P, F}), whole(t, {P, F}));
  std::vector<float> x(P * F), y(P * F, -1.f);
  for (int64_t i = 0; i < P * F; ++i) x[i] = static_cast<float>(i % 1000003);
  Executor(b.program()).run({x.data(), y.data()});
  EXPECT_EQ(x, y);
}

namespace {

// out[i] = table[index[i]] (rows of 3), the index tile read as the program runs.
Program gatherProgram(Dtype index_type, bool skip_out_of_bounds) {
  ProgramBuilder b;
  const int table = b.argument({5, 3}), ids = b.argument({4, 1}, index_type), out = b.argument({4, 3});
  const int index = b.tile(Memory::kSbuf, {4, 1}, index_type), rows = b.tile(Memory::kSbuf, {4, 3});
  b.copy(whole(index, {4, 1}), whole(ids, {4, 1}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(rows, {4, 3})).operand0.value = -1.f;
  Instruction& gather = b.copy(whole(rows, {4, 3}), view(table, 0, {{1, 3}, {3, 1}}));
  gather.inputs.push_back(whole(index, {4, 1}));
  gather.indirect = true;
  gather.skip_out_of_bounds = skip_out_of_bounds;
  b.copy(whole(out, {4, 3}), whole(rows, {4, 3}));
  return b.program();
}

}  // namespace

TEST(Executor, IndirectDmaGathersRowsByIndex) {
  std::vector<float> table(15), out(12);
  std::iota(table.begin(), table.end(), 0.f);
  std::vector<int32_t> ids = {4, 0, 2, 4};
  Executor(gatherProgram(Dtype::kInt32, false)).run({table.data(), ids.data(), out.data()});
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[i * 3 + c], table[ids[i] * 3 + c]) << i << "," << c;
  }
}

TEST(Executor, IndirectDmaPastItsTensorThrowsOrSkips) {
  std::vector<float> table(15, 7.f), out(12, 0.f);
  std::vector<uint32_t> ids = {1, 5, 0, 2};  // 5 is one row past the table
  EXPECT_THROW(Executor(gatherProgram(Dtype::kUInt32, false)).run({table.data(), ids.data(), out.data()}),
               std::out_of_range);
  Executor(gatherProgram(Dtype::kUInt32, true)).run({table.data(), ids.data(), out.data()});
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(out[c], 7.f);
    EXPECT_EQ(out[3 + c], -1.f);  // skipped: the row keeps what the tile held
    EXPECT_EQ(out[6 + c], 7.f);
  }
}

TEST(Executor, IndirectDmaScattersRowsToIndexedRows) {
  ProgramBuilder b;
  const int rows = b.argument({3, 2}), ids = b.argument({3, 1}, Dtype::kInt32), out = b.argument({4, 2});
  const int index = b.tile(Memory::kSbuf, {3, 1}, Dtype::kInt32), tile = b.tile(Memory::kSbuf, {3, 2});
  b.copy(whole(index, {3, 1}), whole(ids, {3, 1}));
  b.copy(whole(tile, {3, 2}), whole(rows, {3, 2}));
  Instruction& scatter = b.copy(view(out, 0, {{1, 2}, {2, 1}}), whole(tile, {3, 2}));
  scatter.inputs.push_back(whole(index, {3, 1}));
  scatter.indirect = true;
  scatter.indirect_destination = true;
  std::vector<float> values = {1, 2, 3, 4, 5, 6}, result(8, 0.f);
  std::vector<int32_t> where = {3, 0, 2};
  Executor(b.program()).run({values.data(), where.data(), result.data()});
  EXPECT_EQ(result, (std::vector<float>{3, 4, 0, 0, 5, 6, 1, 2}));
}

TEST(Executor, DmaReadModifyWriteAddsIntoItsDestination) {
  // dst_rmw_op=add: a bf16 tile added twice into an fp32 destination (1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly).
  ProgramBuilder b;
  const int in = b.argument({1, 3}), out = b.argument({1, 3});
  const int t = b.tile(Memory::kSbuf, {1, 3}, Dtype::kBFloat16);
  b.copy(whole(t, {1, 3}), whole(in, {1, 3}));
  b.copy(whole(out, {1, 3}), whole(t, {1, 3})).accumulate = true;
  b.copy(whole(out, {1, 3}), whole(t, {1, 3})).accumulate = true;
  std::vector<float> x = {std::ldexp(1.f, -8), 2.f, -0.5f}, y = {1.f, 10.f, 0.25f};
  Executor(b.program()).run({x.data(), y.data()});
  EXPECT_EQ(y, (std::vector<float>{1.f + std::ldexp(1.f, -7), 14.f, -0.75f}));
}

TEST(Executor, IndirectScatterWithAddSumsRepeatedIndices) {
  ProgramBuilder b;
  const int rows = b.argument({4, 2}), ids = b.argument({4, 1}, Dtype::kInt32), out = b.argument({3, 2});
  const int index = b.tile(Memory::kSbuf, {4, 1}, Dtype::kInt32), tile = b.tile(Memory::kSbuf, {4, 2});
  b.copy(whole(index, {4, 1}), whole(ids, {4, 1}));
  b.copy(whole(tile, {4, 2}), whole(rows, {4, 2}));
  Instruction& scatter = b.copy(view(out, 0, {{1, 2}, {2, 1}}), whole(tile, {4, 2}));
  scatter.inputs.push_back(whole(index, {4, 1}));
  scatter.indirect = true;
  scatter.indirect_destination = true;
  scatter.accumulate = true;
  std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8}, result = {100, 200, 0, 0, 0, 0};
  std::vector<int32_t> where = {2, 0, 2, 2};
  Executor(b.program()).run({values.data(), where.data(), result.data()});
  EXPECT_EQ(result, (std::vector<float>{103, 204, 0, 0, 13, 16}));
}

TEST(Executor, SequenceBoundsGivesEachSegmentsFirstAndOnePastItsLast) {
  // Padding (id 0) gets the length and -1; 5, 7, 5 are three segments; int32 ids, fp32 bounds.
  ProgramBuilder b;
  const int ids = b.argument({1, 8}, Dtype::kInt32), out = b.argument({1, 2, 8});
  const int tile = b.tile(Memory::kSbuf, {1, 8}, Dtype::kInt32), bounds = b.tile(Memory::kSbuf, {1, 2, 8});
  b.copy(whole(tile, {1, 8}), whole(ids, {1, 8}));
  b.emit(Opcode::kSequenceBounds, Engine::kGpSimd, whole(bounds, {1, 2, 8}), {whole(tile, {1, 8})});
  b.copy(whole(out, {1, 2, 8}), whole(bounds, {1, 2, 8}));
  std::vector<int32_t> segment_ids = {0, 4, 4, 5, 7, 5, 5, 0};
  std::vector<float> result(16, 99.f);
  Executor(b.program()).run({segment_ids.data(), result.data()});
  EXPECT_EQ(result, (std::vector<float>{8, 1, 1, 3, 4, 5, 5, 8, -1, 3, 3, 4, 5, 7, 7, -1}));
}

TEST(Executor, LocalGatherTakesEachCoresIndicesPartitionFirst) {
  // One GpSimd core (16 partitions of 4 values): indices 2, 0, 1 are partition 0's, 1's and 2's first
  // index; every partition gathers its own elements at them, two at a time.
  ProgramBuilder b;
  const int data = b.argument({16, 8}), ids = b.argument({16, 1}, Dtype::kUInt16), out = b.argument({16, 6});
  const int src = b.tile(Memory::kSbuf, {16, 8}), index = b.tile(Memory::kSbuf, {16, 1}, Dtype::kUInt16);
  const int got = b.tile(Memory::kSbuf, {16, 6});
  b.copy(whole(src, {16, 8}), whole(data, {16, 8}));
  b.copy(whole(index, {16, 1}), whole(ids, {16, 1}));
  b.emit(Opcode::kLocalGather, Engine::kGpSimd, whole(got, {16, 6}), {whole(src, {16, 8}), whole(index, {16, 1})})
      .coefficients = {2.f, 3.f};
  b.copy(whole(out, {16, 6}), whole(got, {16, 6}));
  std::vector<float> values(128), result(96, -1.f);
  std::iota(values.begin(), values.end(), 0.f);
  std::vector<uint16_t> indices(16, 3);
  indices[0] = 2, indices[1] = 0, indices[2] = 1;
  Executor(b.program()).run({values.data(), indices.data(), result.data()});
  for (int p = 0; p < 16; ++p) {
    const float row = 8.f * p;
    EXPECT_EQ(std::vector<float>(result.begin() + 6 * p, result.begin() + 6 * p + 6),
              (std::vector<float>{row + 4, row + 5, row + 0, row + 1, row + 2, row + 3}))
        << "partition " << p;
  }
}

TEST(Executor, DmaComputeSumsNineSourcesIntoOneOfThem) {
  // dst is source 0 as well; nine sources take two passes of the row loop.
  ProgramBuilder b;
  std::vector<int> sources;
  for (int k = 0; k < 9; ++k) sources.push_back(b.argument({2, 3}));
  std::vector<Access> inputs;
  for (int source : sources) inputs.push_back(whole(source, {2, 3}));
  b.emit(Opcode::kDmaCompute, Engine::kDma, whole(sources[0], {2, 3}), inputs);
  std::vector<std::vector<float>> values(9, std::vector<float>(6));
  std::vector<void*> buffers;
  for (int k = 0; k < 9; ++k) {
    for (int e = 0; e < 6; ++e) values[k][e] = static_cast<float>((k + 1) * (e + 1));
    buffers.push_back(values[k].data());
  }
  Executor(b.program()).run(buffers);
  for (int e = 0; e < 6; ++e) EXPECT_EQ(values[0][e], 45.f * (e + 1)) << e;  // (1 + ... + 9) x (e + 1)
}

TEST(Executor, AnAliasSharesItsOwnersMemory) {
  // An fp32 tile written, then read through a uint8 alias of it (each partition's 8 bytes).
  ProgramBuilder b;
  const int in = b.argument({2, 2}), out = b.argument({2, 8}, Dtype::kUInt8);
  const int tile = b.tile(Memory::kSbuf, {2, 2});
  const int other = b.tile(Memory::kSbuf, {2, 2});  // lives at the same time: must not share the space
  const int bytes = b.tile(Memory::kSbuf, {2, 8}, Dtype::kUInt8);
  b.program().tensors[bytes].alias_of = tile;
  b.copy(whole(tile, {2, 2}), whole(in, {2, 2}));
  b.emit(Opcode::kMemset, Engine::kVector, whole(other, {2, 2}));
  b.copy(whole(out, {2, 8}), whole(bytes, {2, 8}));
  b.emit(Opcode::kTensorCopy, Engine::kVector, whole(other, {2, 2}), {whole(tile, {2, 2})});
  ASSERT_TRUE(verify(b.program(), kNeuronCoreV3).empty());
  std::vector<float> values = {1.5f, -2.f, 3.25f, 1e30f};
  std::vector<uint8_t> result(16);
  Executor(b.program()).run({values.data(), result.data()});
  EXPECT_EQ(std::memcmp(result.data(), values.data(), 16), 0);
}
