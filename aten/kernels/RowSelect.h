// Row loops of the selections a generation loop makes over vocabulary rows
// (aten/ops/RowSelection.cpp), with the widest SIMD the CPU has: the same
// code compiled for AVX-512, AVX2 and the x86-64 baseline, chosen by
// runtime/SimdLevel.h.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

namespace torch_neuronx {

// out[j] = fill where mask[j] == fill_where_true, else values[j], for j < n; Bits is an
// unsigned integer of the element's size (where moves bits, whatever the dtype).
template <typename Bits>
void selectRow(const bool* mask, const Bits* values, Bits fill, bool fill_where_true, Bits* out, int64_t n);

// The index of the row's largest value, the first of equal ones, or of its first NaN, as torch's
// argmax answers (NaN counts as larger than everything). n > 0. T is float, BFloat16 or Half.
template <typename T>
int64_t argmaxRow(const T* values, int64_t n);

}  // namespace torch_neuronx
