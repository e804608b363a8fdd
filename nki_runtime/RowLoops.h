// Loops over the rows of an access pattern and per-thread fp32 scratch rows: what the instruction
// implementations (Instructions.cpp, PartitionSummaries.cpp) share.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

// Scratch rows of fp32 (slots 0-3), reused across instructions of a thread.
float* scratch(int slot, int64_t count);

// The rows of `shape`: the indices of all but its last axis.
inline int64_t rowCount(const Access& shape) {
  int64_t rows = 1;
  for (int a = 0; a + 1 < shape.rank; ++a) rows *= shape.sizes[a];
  return rows;
}

// Calls row(offsets) for rows [begin, end) of `shape` (row-major over all but
// its last axis), offsets[v] being where views[v]'s row starts (in elements).
template <typename Row>
void forEachRow(const Access& shape, const std::vector<const Access*>& views, Row row, int64_t begin,
                int64_t end) {
  std::array<int64_t, kMaxAxes> index{};
  for (int64_t a = shape.rank - 2, rest = begin; a >= 0; --a) {
    index[a] = rest % shape.sizes[a];
    rest /= shape.sizes[a];
  }
  std::array<int64_t, 8> offsets{};
  for (int64_t r = begin; r < end; ++r) {
    for (std::size_t v = 0; v < views.size(); ++v) {
      int64_t offset = views[v]->offset;
      for (int a = 0; a + 1 < shape.rank; ++a) offset += index[a] * views[v]->strides[a];
      offsets[v] = offset;
    }
    row(offsets);
    for (int a = shape.rank - 2; a >= 0; --a) {
      if (++index[a] < shape.sizes[a]) break;
      index[a] = 0;
    }
  }
}

template <typename Row>
void forEachRow(const Access& shape, const std::vector<const Access*>& views, Row row) {
  forEachRow(shape, views, row, 0, rowCount(shape));
}

inline int64_t inner(const Access& access) { return access.sizes[access.rank - 1]; }
inline int64_t innerStride(const Access& access) { return access.strides[access.rank - 1]; }

// Calls row(offsets, start, step) for each row of `dst` in order, with the affine value of the row's first
// element (terms[0] + the row's index times the leading axes' steps) and its last axis's step, as Value
// (iota and affine_select: fp32 coefficients as double, or int32 arithmetic's exact terms as int64_t).
template <typename Value, typename Term, typename Row>
void forEachAffineRow(const Access& dst, const std::vector<const Access*>& views, const std::vector<Term>& terms,
                      Row row) {
  std::array<int64_t, kMaxAxes> index{};
  forEachRow(dst, views, [&](const std::array<int64_t, 8>& o) {
    Value start = terms.empty() ? Value{0} : static_cast<Value>(terms[0]);
    for (int a = 0; a + 1 < dst.rank; ++a) start += index[a] * static_cast<Value>(terms[1 + a]);
    row(o, start, static_cast<Value>(terms[dst.rank]));
    for (int a = dst.rank - 2; a >= 0; --a) {
      if (++index[a] < dst.sizes[a]) break;
      index[a] = 0;
    }
  });
}

// The block a reduction folds into one element of its dst: data's axes after the first `kept` (offset unset).
inline Access trailingAxes(const Access& data, int kept) {
  Access block = data;
  block.rank = data.rank - kept;
  for (int a = 0; a < block.rank; ++a) {
    block.sizes[a] = data.sizes[kept + a];
    block.strides[a] = data.strides[kept + a];
  }
  return block;
}

// Partition p of a view: its free axes only.
inline Access partitionOf(const Access& view, int64_t p) {
  Access part = view;
  part.offset += p * view.strides[0];
  part.sizes[0] = 1;
  return part;
}

}  // namespace nki
