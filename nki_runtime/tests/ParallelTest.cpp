// Instructions spread over lent threads give the results of the calling thread alone, and an
// instruction whose rows read what other rows write keeps its order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "nki_runtime/Executor.h"
#include "nki_runtime/Parallel.h"
#include "nki_runtime/tests/ProgramBuilder.h"

using namespace nki;
using nki::testing::ProgramBuilder;
using nki::testing::view;
using nki::testing::whole;

namespace {

std::atomic<int> splits{0};  // calls that ran on more than one thread

// Up to four ranges, each on its own thread; the last range goes first, so that no order is assumed.
void fourThreads(int64_t count, int64_t min_chunk, const RangeBody& body) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(4, count / std::max<int64_t>(min_chunk, 1)));
  if (chunks > 1) ++splits;
  std::vector<std::thread> threads;
  for (int64_t c = chunks - 1; c >= 0; --c) threads.emplace_back([&, c] { body(count * c / chunks, count * (c + 1) / chunks); });
  for (auto& t : threads) t.join();
}

// Runs `program` on the calling thread alone, then with four lent threads; returns both outputs.
template <typename T>
std::pair<std::vector<T>, std::vector<T>> aloneAndLent(const Program& program, std::vector<std::vector<T>> inputs,
                                                       std::size_t out_elements, int* lent_splits) {
  std::vector<std::vector<T>> outputs(2, std::vector<T>(out_elements));
  for (int lent = 0; lent < 2; ++lent) {
    setParallelFor(lent ? &fourThreads : nullptr);
    const int before = splits.load();
    std::vector<void*> hbm;
    for (auto& input : inputs) hbm.push_back(input.data());
    hbm.push_back(outputs[lent].data());
    Executor(program).run(hbm);
    if (lent) *lent_splits = splits.load() - before;
  }
  setParallelFor(nullptr);
  return {outputs[0], outputs[1]};
}

}  // namespace

TEST(ParallelExecutor, ElementWiseRowsSplitAndAgree) {
  const int64_t P = 128, F = 1024;  // 512 KiB a tile
  ProgramBuilder b;
  const int x = b.argument({P, F}), y = b.argument({P, F}), out = b.argument({P, F});
  const int tx = b.tile(Memory::kSbuf, {P, F}), ty = b.tile(Memory::kSbuf, {P, F});
  b.copy(whole(tx, {P, F}), whole(x, {P, F}));
  b.copy(whole(ty, {P, F}), whole(y, {P, F}));
  b.emit(Opcode::kTensorTensor, Engine::kVector, whole(tx, {P, F}), {whole(tx, {P, F}), whole(ty, {P, F})}).op0 =
      AluOp::kMultiply;  // in place: each element read before it is written
  Instruction& act = b.emit(Opcode::kActivation, Engine::kScalar, whole(ty, {P, F}), {whole(tx, {P, F})});
  act.function = Function::kExp;
  act.op0 = AluOp::kMultiply;
  act.operand0.value = 0.001f;
  b.copy(whole(out, {P, F}), whole(ty, {P, F}));
  std::vector<float> xv(P * F), yv(P * F);
  for (int64_t i = 0; i < P * F; ++i) {
    xv[i] = static_cast<float>(i % 97) - 48.f;
    yv[i] = static_cast<float>(i % 13) * 0.25f;
  }
  int lent_splits = 0;
  const auto [alone, lent] = aloneAndLent<float>(b.program(), {xv, yv}, P * F, &lent_splits);
  EXPECT_GE(lent_splits, 1);  // one partition stream (PartitionStreams.h) spread over the threads
  EXPECT_EQ(alone, lent);
  EXPECT_FLOAT_EQ(alone[5], std::exp(0.001f * xv[5] * yv[5]));
}

TEST(ParallelExecutor, RowsThatReadOtherRowsWritesKeepTheirOrder) {
  // Row r of a tile becomes row r - 1 of the same tile, in place: in row order each row copies the one
  // already copied into it, so every row ends as row 0. Split rows would leave other values.
  const int64_t P = 128, F = 512;
  ProgramBuilder b;
  const int x = b.argument({P, F}), out = b.argument({P, F});
  const int t = b.tile(Memory::kSbuf, {P, F});
  b.copy(whole(t, {P, F}), whole(x, {P, F}));
  b.emit(Opcode::kTensorCopy, Engine::kVector, view(t, F, {{P - 1, F}, {F, 1}}), {view(t, 0, {{P - 1, F}, {F, 1}})});
  b.copy(whole(out, {P, F}), whole(t, {P, F}));
  std::vector<float> xv(P * F);
  for (int64_t i = 0; i < P * F; ++i) xv[i] = static_cast<float>(i);
  int lent_splits = 0;
  const auto [alone, lent] = aloneAndLent<float>(b.program(), {xv}, P * F, &lent_splits);
  EXPECT_EQ(lent_splits, 2);  // the load and the store; not the shifting copy
  EXPECT_EQ(alone, lent);
  for (int64_t r = 0; r < P; ++r) EXPECT_EQ(lent[r * F + 7], 7.f) << r;
}

TEST(ParallelExecutor, Bf16MatmulColumnBandsAgree) {
  const int64_t K = 128, M = 128, N = 512;
  ProgramBuilder b;
  const int s = b.argument({K, M}, Dtype::kBFloat16), m = b.argument({K, N}, Dtype::kBFloat16);
  const int out = b.argument({M, N});
  const int ts = b.tile(Memory::kSbuf, {K, M}, Dtype::kBFloat16), tm = b.tile(Memory::kSbuf, {K, N}, Dtype::kBFloat16);
  const int acc = b.tile(Memory::kPsum, {M, N});
  b.copy(whole(ts, {K, M}), whole(s, {K, M}));
  b.copy(whole(tm, {K, N}), whole(m, {K, N}));
  b.emit(Opcode::kMatmul, Engine::kTensor, whole(acc, {M, N}), {whole(ts, {K, M}), whole(tm, {K, N})});
  b.emit(Opcode::kMatmul, Engine::kTensor, whole(acc, {M, N}), {whole(ts, {K, M}), whole(tm, {K, N})})
      .accumulate = true;
  b.copy(whole(out, {M, N}), whole(acc, {M, N}));
  std::vector<uint16_t> sv(K * M), mv(K * N);
  std::vector<float> sf(K * M), mf(K * N);
  for (int64_t i = 0; i < K * M; ++i) nki::fromFloat(sf[i] = static_cast<float>((i * 7) % 11) - 5.f, &sv[i], Dtype::kBFloat16);
  for (int64_t i = 0; i < K * N; ++i) {
    nki::fromFloat(mf[i] = static_cast<float>((i * 5) % 13) * 0.5f - 3.f, &mv[i], Dtype::kBFloat16);
  }
  std::vector<float> alone(M * N), lent(M * N);
  for (int lent_threads = 0; lent_threads < 2; ++lent_threads) {
    setParallelFor(lent_threads ? &fourThreads : nullptr);
    const int before = splits.load();
    Executor(b.program()).run({sv.data(), mv.data(), (lent_threads ? lent : alone).data()});
    if (lent_threads) EXPECT_GE(splits.load() - before, 2);  // both matmuls
  }
  setParallelFor(nullptr);
  EXPECT_EQ(alone, lent);
  for (int64_t j : {0L, 63L, 64L, 300L, 511L}) {
    float expected = 0;
    for (int64_t k = 0; k < K; ++k) expected += sf[k * M + 3] * mf[k * N + j];
    EXPECT_EQ(lent[3 * N + j], 2 * expected) << j;  // small exact values: exact in any order
  }
}
