// Microscaling (OCP MX) on NeuronCore-v4: quantize_mx (Vector engine) writes
// packed fp8 data and its scales, nc_matmul_mx (Tensor engine) multiplies
// packed data, scaling as it goes.
//
// A [P, F] tile of a packed type holds P x 4F values: element [p, f] packs
// values 4f..4f+3 of partition p. One scale (an E8M0 byte e: 2^(e - 127),
// 255 NaN) covers a group of 8 partitions by one packed element (32 values).
// A tile of at most 32 partitions keeps its scales in a [P / 8, F] tile; a
// larger one keeps the scales of partitions 32q..32q+31 in partitions
// 32q..32q+3 of a tile as tall as the data (AWS's nki.isa.nc_matmul_mx:
// "the same partition offset at each quadrant").
#pragma once

#include <cstdint>

#include "nki_runtime/Dtype.h"
#include "nki_runtime/Instructions.h"

namespace nki {

// The row of the scale view that holds the scales of partitions 8g..8g+7 of a `partitions`-tall tile.
inline int64_t scaleRow(int64_t group, int64_t partitions) {
  return partitions <= 32 ? group : group / 4 * 32 + group % 4;
}

// The largest exponent of a packed type's values (OCP MX: emax_elem): 15 for e5m2, 8 for e4m3, 2 for e2m1.
int maxExponent(Dtype packed);

// Value j (0-3) of a packed element.
float packedValue(const char* element, Dtype packed, int j);

// kQuantizeMxScales: dst (uint8) = each group's scale; kQuantizeMx: dst = the packed values of inputs[0]
// divided by the scales inputs[1] holds, saturated to the type's largest finite value.
void quantizeMxScales(const Bound& b);
void quantizeMx(const Bound& b);

// kMatmulMx: dst[M, N] (+)= sum over k, j of stationary[k, m, j] * moving[k, n, j], each value scaled.
void matmulMx(const Bound& b);

}  // namespace nki
