#include "aten/kernels/AmxBf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"
#include "runtime/AlignedVector.h"

namespace torch_neuronx {
namespace {

constexpr int kTileRows = 16;   // weight rows per block; also packed left pairs per k-step
constexpr int kTileK = 32;      // bf16 values of K per tile row (64 bytes)

// The tile configuration register's memory image (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Tile 0 accumulates C^T [16 weight rows x 16 left rows] in fp32; tile 1 is a
// 16 x 32 block of the weight; tile 2 the matching 16 pairs x 16 left rows.
TileConfig makeConfig() {
  TileConfig config;
  for (int tile = 0; tile < 3; ++tile) {
    config.bytes_per_row[tile] = 64;
    config.rows[tile] = kTileRows;
  }
  return config;
}

// Left rows packed as the tile unit reads its second operand: for each pair
// of K, the 16 (zero-padded) rows' two values side by side; each tile row on a cache line.
nrt::AlignedVector<c10::BFloat16> packLeft(const c10::BFloat16* left, int64_t left_stride, int64_t M, int64_t K) {
  nrt::AlignedVector<c10::BFloat16> packed(static_cast<size_t>(K / 2) * kAmxRows * 2, c10::BFloat16(0.f));
  for (int64_t pair = 0; pair < K / 2; ++pair) {
    for (int64_t m = 0; m < M; ++m) {
      packed[(pair * kAmxRows + m) * 2] = left[m * left_stride + 2 * pair];
      packed[(pair * kAmxRows + m) * 2 + 1] = left[m * left_stride + 2 * pair + 1];
    }
  }
  return packed;
}

// Weight rows [16 * begin_block, 16 * end_block) on the tile unit.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) void tileBlocks(
    const c10::BFloat16* weight, const c10::BFloat16* packed, const c10::BFloat16* bias, c10::BFloat16* out,
    int64_t M, int64_t N, int64_t K, int64_t begin_block, int64_t end_block) {
  static const TileConfig config = makeConfig();
  _tile_loadconfig(&config);
  alignas(64) float sums[kTileRows][kAmxRows];
  for (int64_t block = begin_block; block < end_block; ++block) {
    const int64_t n0 = block * kTileRows;
    _tile_zero(0);
    for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
      _tile_loadd(1, weight + n0 * K + k0, K * sizeof(c10::BFloat16));
      _tile_loadd(2, packed + (k0 / 2) * kAmxRows * 2, kAmxRows * 2 * sizeof(c10::BFloat16));
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, sums, kAmxRows * sizeof(float));
    for (int r = 0; r < kTileRows; ++r) {
      const float b = bias ? static_cast<float>(bias[n0 + r]) : 0.f;
      for (int64_t m = 0; m < M; ++m) out[m * N + n0 + r] = c10::BFloat16(sums[r][m] + b);
    }
  }
  _tile_release();
}

// The last N % 16 weight rows, one dot product at a time.
void tailRows(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
              const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K, int64_t first_row) {
  for (int64_t n = first_row; n < N; ++n) {
    const float b = bias ? static_cast<float>(bias[n]) : 0.f;
    for (int64_t m = 0; m < M; ++m) {
      out[m * N + n] = c10::BFloat16(dotWidened(weight + n * K, left + m * left_stride, K) + b);
    }
  }
}

}  // namespace

bool hasAmxBf16() { return simdLevel() == SimdLevel::kAmx; }

void amxFewRowsTimesWeight(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
                           const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K) {
  const nrt::AlignedVector<c10::BFloat16> packed = packLeft(left, left_stride, M, K);
  const int64_t blocks = N / kTileRows;
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_blocks = std::max<int64_t>(1, (int64_t{64} << 10) / (kTileRows * K * 2));
  parallelRows(blocks, min_blocks, [&](int64_t begin, int64_t end) {
    tileBlocks(weight, packed.data(), bias, out, M, N, K, begin, end);
  });
  tailRows(left, left_stride, M, weight, bias, out, N, K, blocks * kTileRows);
}

}  // namespace torch_neuronx
