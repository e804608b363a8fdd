#include "nki_runtime/IndirectDma.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace nki {
namespace {

// The i-th index, in row-major order of the index tile's view.
int64_t indexValue(const Bound& b, int64_t i) {
  const Access& index = b.in.inputs[1];
  int64_t offset = index.offset;
  for (int a = index.rank - 1; a >= 0; --a) {
    offset += (i % index.sizes[a]) * index.strides[a];
    i /= index.sizes[a];
  }
  const char* at = b.inputs[1] + offset * static_cast<int64_t>(byteSize(b.input_types[1]));
  if (b.input_types[1] == Dtype::kUInt32) return *reinterpret_cast<const uint32_t*>(at);
  return *reinterpret_cast<const int32_t*>(at);
}

}  // namespace

void gather(const Bound& b) {
  const int dim = b.in.indirect_dim;
  const int64_t count = b.in.inputs[1].elements();
  const bool scatter = b.in.indirect_destination;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t value = indexValue(b, i);
    Instruction one = b.in;  // this row alone: a plain copy
    one.indirect = false;
    one.inputs.resize(1);
    Access& addressed = scatter ? one.dst : one.inputs[0];  // the one-row pattern the index moves
    Access& dense = scatter ? one.inputs[0] : one.dst;
    const int64_t stride = addressed.strides[dim];
    // An index past the tensor's size is out whatever the stride (and a huge one would overflow below).
    const bool reachable = value >= 0 && (stride == 0 || value <= b.gathered_elements / std::abs(stride));
    if (reachable) addressed.offset += value * stride;
    dense.offset += i * dense.strides[dim];
    dense.sizes[dim] = 1;
    if (!reachable || addressed.lowest() < 0 || addressed.highest() > b.gathered_elements) {
      if (b.in.skip_out_of_bounds) continue;
      throw std::out_of_range("indirect DMA: index " + std::to_string(value) + " (position " + std::to_string(i) +
                              ") reaches outside the " + (scatter ? "destination" : "source") +
                              " tensor (oob_mode=skip skips such rows)");
    }
    copyView(Bound{one, b.dst, b.dst_type, {b.inputs[0]}, {b.input_types[0]}, false});
  }
}

}  // namespace nki
