#include "nki_runtime/AmxMatmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "runtime/AlignedVector.h"
#include "runtime/SimdLevel.h"

namespace nki {
namespace {

constexpr int64_t kTile = 16;  // rows of every tile; fp32 columns of a sum tile; K pairs of an operand row

// The tile configuration register's memory image (palette 1): eight 16-row tiles of 64-byte rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

TileConfig makeConfig() {
  TileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    config.bytes_per_row[tile] = 64;
    config.rows[tile] = kTile;
  }
  return config;
}

int64_t roundUp(int64_t value) { return (value + kTile - 1) / kTile * kTile; }

// Two contraction rows side by side, as the tile unit reads both operands:
// pairs[x * x_step + p * p_step] = (t[2p][x], t[2p + 1][x]) for x < count,
// zero beyond K; `pairs` already holds zeros for the padding rows and columns.
void packPairs(const uint16_t* t, int64_t rows_stride, int64_t cols_stride, int64_t K, int64_t count,
               uint32_t* pairs, int64_t x_step, int64_t p_step) {
  for (int64_t p = 0; 2 * p < K; ++p) {
    const uint16_t* even = t + 2 * p * rows_stride;
    const uint16_t* odd = 2 * p + 1 < K ? even + rows_stride : nullptr;
    uint32_t* row = pairs + p * p_step;
    if (odd && cols_stride == 1 && x_step == 1) {  // the moving tile's rows: a loop the compiler vectorises
      for (int64_t x = 0; x < count; ++x) row[x] = even[x] | static_cast<uint32_t>(odd[x]) << 16;
      continue;
    }
    for (int64_t x = 0; x < count; ++x) {
      const uint32_t high = odd ? odd[x * cols_stride] : 0;
      row[x * x_step] = even[x * cols_stride] | high << 16;
    }
  }
}

// packPairs for a stationary tile stored [K, M] row-major (rows `s_rows` apart), K even:
// a[x * pairs_pad + p] = (s[2p][x], s[2p + 1][x]), a transposition done in 16 x 16 blocks of pairs
// so that its reads and writes both stay within a few cache lines.
void packStationaryRows(const uint16_t* s, int64_t s_rows, int64_t K, int64_t M, uint32_t* a, int64_t pairs_pad) {
  const int64_t pairs = K / 2;
  for (int64_t p0 = 0; p0 < pairs; p0 += kTile) {
    const int64_t p1 = std::min(pairs, p0 + kTile);
    for (int64_t x0 = 0; x0 < M; x0 += kTile) {
      const int64_t x1 = std::min(M, x0 + kTile);
      for (int64_t p = p0; p < p1; ++p) {
        const uint16_t* even = s + 2 * p * s_rows;
        const uint16_t* odd = even + s_rows;
        for (int64_t x = x0; x < x1; ++x) a[x * pairs_pad + p] = even[x] | static_cast<uint32_t>(odd[x]) << 16;
      }
    }
  }
}

// Sums c[32 x 32] (RA x CB tiles of 16 x 16; tiles 0-3) += a rows (tiles 4, 5) times b columns (tiles 6, 7),
// over `pair_tiles` steps of 16 pairs. Strides in bytes.
template <int RA, int CB>
__attribute__((target("amx-tile,amx-bf16"))) void sumBlock(const uint32_t* a, int64_t a_stride, const uint32_t* b,
                                                           int64_t b_stride, float* c, int64_t c_stride,
                                                           int64_t pair_tiles) {
  char* c_bytes = reinterpret_cast<char*>(c);
  const char* a_bytes = reinterpret_cast<const char*>(a);
  const char* b_bytes = reinterpret_cast<const char*>(b);
  _tile_loadd(0, c_bytes, c_stride);
  if constexpr (CB == 2) _tile_loadd(1, c_bytes + 64, c_stride);
  if constexpr (RA == 2) _tile_loadd(2, c_bytes + kTile * c_stride, c_stride);
  if constexpr (RA == 2 && CB == 2) _tile_loadd(3, c_bytes + kTile * c_stride + 64, c_stride);
  for (int64_t q = 0; q < pair_tiles; ++q) {
    _tile_loadd(4, a_bytes + q * 64, a_stride);
    if constexpr (RA == 2) _tile_loadd(5, a_bytes + kTile * a_stride + q * 64, a_stride);
    _tile_loadd(6, b_bytes + q * kTile * b_stride, b_stride);
    if constexpr (CB == 2) _tile_loadd(7, b_bytes + q * kTile * b_stride + 64, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (CB == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (RA == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (RA == 2 && CB == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c_bytes, c_stride);
  if constexpr (CB == 2) _tile_stored(1, c_bytes + 64, c_stride);
  if constexpr (RA == 2) _tile_stored(2, c_bytes + kTile * c_stride, c_stride);
  if constexpr (RA == 2 && CB == 2) _tile_stored(3, c_bytes + kTile * c_stride + 64, c_stride);
}

__attribute__((target("amx-tile"))) void loadConfig() {
  static const TileConfig config = makeConfig();
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void releaseTiles() { _tile_release(); }

// c [rows_pad, cols_pad] (row stride c_stride floats) += a^T b over pair_tiles * 16 pairs.
void sumAll(const uint32_t* a, int64_t pairs_pad, const uint32_t* b, int64_t cols_pad, float* c, int64_t c_stride,
            int64_t rows_pad) {
  const int64_t a_stride = pairs_pad * 4, b_stride = cols_pad * 4, c_bytes = c_stride * 4;
  const int64_t pair_tiles = pairs_pad / kTile;
  loadConfig();
  for (int64_t i = 0; i < rows_pad; i += 2 * kTile) {
    const bool two_rows = i + kTile < rows_pad;
    const uint32_t* a_rows = a + i * pairs_pad;
    for (int64_t j = 0; j < cols_pad; j += 2 * kTile) {
      const bool two_cols = j + kTile < cols_pad;
      float* sums = c + i * c_stride + j;
      if (two_rows && two_cols) {
        sumBlock<2, 2>(a_rows, a_stride, b + j, b_stride, sums, c_bytes, pair_tiles);
      } else if (two_rows) {
        sumBlock<2, 1>(a_rows, a_stride, b + j, b_stride, sums, c_bytes, pair_tiles);
      } else if (two_cols) {
        sumBlock<1, 2>(a_rows, a_stride, b + j, b_stride, sums, c_bytes, pair_tiles);
      } else {
        sumBlock<1, 1>(a_rows, a_stride, b + j, b_stride, sums, c_bytes, pair_tiles);
      }
    }
  }
  releaseTiles();
}

}  // namespace

bool hasAmxTiles() { return nrt::simdLevel() == nrt::SimdLevel::kAmx; }

void multiplyBf16Amx(const uint16_t* s, int64_t s_rows, int64_t s_cols, const uint16_t* m, int64_t m_rows,
                     int64_t m_cols, float* out, int64_t out_rows, int64_t K, int64_t M, int64_t N) {
  const int64_t pairs_pad = roundUp((K + 1) / 2), rows_pad = roundUp(M), cols_pad = roundUp(N);
  thread_local nrt::AlignedVector<uint32_t> a, b;  // tile rows on cache lines
  thread_local nrt::AlignedVector<float> padded;
  // Zeros only where tiles reach past the operands: packing writes every other element.
  const bool exact = rows_pad == M && cols_pad == N && pairs_pad * 2 == K;
  if (exact) {
    a.resize(rows_pad * pairs_pad);
    b.resize(pairs_pad * cols_pad);
  } else {
    a.assign(rows_pad * pairs_pad, 0);
    b.assign(pairs_pad * cols_pad, 0);
  }
  if (s_cols == 1 && K % 2 == 0) {
    packStationaryRows(s, s_rows, K, M, a.data(), pairs_pad);
  } else {
    packPairs(s, s_rows, s_cols, K, M, a.data(), pairs_pad, 1);  // a row per output row: the stationary's column
  }
  packPairs(m, m_rows, m_cols, K, N, b.data(), 1, cols_pad);   // b row per pair of contraction rows
  if (rows_pad == M && cols_pad == N) return sumAll(a.data(), pairs_pad, b.data(), cols_pad, out, out_rows, rows_pad);
  // A ragged tile: sums in a padded copy of out, so that no tile reaches past its rows or columns.
  padded.assign(rows_pad * cols_pad, 0.f);
  for (int64_t i = 0; i < M; ++i) std::copy(out + i * out_rows, out + i * out_rows + N, padded.data() + i * cols_pad);
  sumAll(a.data(), pairs_pad, b.data(), cols_pad, padded.data(), cols_pad, rows_pad);
  for (int64_t i = 0; i < M; ++i) {
    std::copy(padded.data() + i * cols_pad, padded.data() + i * cols_pad + N, out + i * out_rows);
  }
}

}  // namespace nki
