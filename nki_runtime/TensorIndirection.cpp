#include "nki_runtime/TensorIndirection.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace nki {
namespace {

// Where column i of partition p of the staged operand lives in the data view, checked against its columns.
class ColumnOffsets {
 public:
  ColumnOffsets(const Bound& b, int64_t columns)
      : b_(b), index_(b.in.inputs[1]), group_(static_cast<int64_t>(b.in.coefficients.at(0))), columns_(columns) {}

  int64_t at(int64_t p, int64_t i) const {
    const int64_t row = p / group_ * group_ + i % group_, column = i / group_;
    uint16_t offset = 0;
    std::memcpy(&offset, b_.at(b_.inputs[1], b_.input_types[1], index_.offset + row * index_.strides[0] +
                                                                      column * index_.strides[1]),
                sizeof offset);
    if (offset >= columns_) {
      throw std::out_of_range("tensor indirection: offset " + std::to_string(offset) + " (index row " +
                              std::to_string(row) + ", column " + std::to_string(column) + ": column " +
                              std::to_string(i) + " of partition " + std::to_string(p) + ") is past the " +
                              std::to_string(columns_) + " columns of the indirect view's data");
    }
    return offset;
  }

 private:
  const Bound& b_;
  const Access& index_;
  int64_t group_;
  int64_t columns_;
};

int64_t elementAt(const Access& view, int64_t p, int64_t column) {
  return view.offset + p * view.strides[0] + column * view.strides[1];
}

// Moves each staged element between the staged operand and its data column: into the staging for a
// gather, out of it for a scatter (the data is the gather's input and the scatter's dst).
void moveColumns(const Bound& b, bool scatter) {
  const Access &staged = scatter ? b.in.inputs[0] : b.in.dst, &data = scatter ? b.in.dst : b.in.inputs[0];
  char* staged_base = scatter ? b.inputs[0] : b.dst;
  char* data_base = scatter ? b.dst : b.inputs[0];
  const ColumnOffsets offsets(b, data.sizes[1]);
  const std::size_t size = byteSize(b.dst_type);
  for (int64_t p = 0; p < staged.sizes[0]; ++p) {
    for (int64_t i = 0; i < staged.sizes[1]; ++i) {
      char* in_staging = b.at(staged_base, b.dst_type, elementAt(staged, p, i));
      char* in_data = b.at(data_base, b.dst_type, elementAt(data, p, offsets.at(p, i)));
      std::memcpy(scatter ? in_data : in_staging, scatter ? in_staging : in_data, size);
    }
  }
}

}  // namespace

void gatherColumns(const Bound& b) { moveColumns(b, false); }

void scatterColumns(const Bound& b) { moveColumns(b, true); }

}  // namespace nki
