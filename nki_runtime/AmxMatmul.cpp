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

// The 16 x 16 block of 32-bit values in rows[0..16) transposed in place.
__attribute__((target("avx512f"), always_inline)) inline void transpose16(__m512i* rows) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    rows[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    rows[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    rows[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    rows[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lanes: rows i, i + 4 and i + 8, i + 12
    t[i] = _mm512_shuffle_i32x4(rows[i], rows[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(rows[i], rows[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(rows[i + 8], rows[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(rows[i + 8], rows[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    const int from = (i % 4) + (i / 4) * 4;  // t[0..3] pair with t[8..11], t[4..7] with t[12..15]
    rows[i] = _mm512_shuffle_i32x4(t[from], t[from + 8], 0x88);
    rows[i + 8] = _mm512_shuffle_i32x4(t[from], t[from + 8], 0xdd);
  }
}

// packPairs for a stationary tile stored [K, M] row-major (rows `s_rows` apart), K a multiple of 32 and
// M of 16: a[x * pairs_pad + p] = (s[2p][x], s[2p + 1][x]), 16 pairs by 16 columns at a time (a 32-bit
// transposition in registers: the scalar loop took about 3 us of a [128, 128] x [128, 512] instruction).
__attribute__((target("avx512f"))) void packStationaryRows(const uint16_t* s, int64_t s_rows, int64_t K, int64_t M,
                                                           uint32_t* a, int64_t pairs_pad) {
  __m512i rows[16];
  for (int64_t p0 = 0; p0 < K / 2; p0 += kTile) {
    for (int64_t x0 = 0; x0 < M; x0 += kTile) {
      for (int i = 0; i < 16; ++i) {
        const uint16_t* even = s + 2 * (p0 + i) * s_rows + x0;
        const __m512i low = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even)));
        const __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + s_rows)));
        rows[i] = _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
      }
      transpose16(rows);
      for (int j = 0; j < 16; ++j) _mm512_storeu_si512(a + (x0 + j) * pairs_pad + p0, rows[j]);
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
  // Sum rows a multiple of 1 KiB apart (a PSUM tile's 2 KiB partitions) share a few of L1's 64 sets; 32 of
  // them at once overflow those sets' ways, and storing the tiles then took half of the instruction's time.
  // Blocks of 16 rows then (one instruction of [128, 128] x [128, 512]: 20 -> 16 us).
  const int64_t block_rows = c_bytes % 1024 == 0 ? kTile : 2 * kTile;
  loadConfig();
  for (int64_t i = 0; i < rows_pad; i += block_rows) {
    const bool two_rows = block_rows == 2 * kTile && i + kTile < rows_pad;
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
  if (s_cols == 1 && K % 32 == 0 && M % kTile == 0) {
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
