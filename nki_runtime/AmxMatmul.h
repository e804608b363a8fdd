// nc_matmul of two bf16 tiles on the CPU's AMX tile unit (Xeon from Sapphire
// Rapids): one tile instruction multiplies 16 x 32 by 32 x 16 bf16 values
// into 16 x 16 fp32 sums, as the Tensor engine multiplies whole tiles. On
// such a CPU torch's own bf16 matmuls use the tile unit; a kernel emulated
// with vector dot products would run an order of magnitude behind them.
#pragma once

#include <cstdint>

namespace nki {

// Whether the SIMD level (runtime/SimdLevel.h) is amx: the CPU has the tile
// unit and the OS granted this process its state.
bool hasAmxTiles();

// out[M, N] (fp32, rows `out_rows` apart, accumulated into) += s[K, M]^T @ m[K, N];
// element (r, c) of s at s[r * s_rows + c * s_cols], of m likewise. Only if hasAmxTiles().
void multiplyBf16Amx(const uint16_t* s, int64_t s_rows, int64_t s_cols, const uint16_t* m, int64_t m_rows,
                     int64_t m_cols, float* out, int64_t out_rows, int64_t K, int64_t M, int64_t N);

}  // namespace nki
