// Tensor indirection (NkiTensor.indirect, NeuronCore-v4): a compute instruction reads or writes columns of
// an on-chip tensor that an index tile chooses as the program runs. The hardware reads the columns as the
// instruction streams; here the tracer stages them in a tile of the operand's shape, gathered before the
// instruction and scattered after it, so that every instruction keeps its one dense-operand implementation.
//
// Offsets are uint16 elements along the data view's free axis. Partitions go in groups of G (16 for the
// Vector, Scalar and GpSimd engines, 32 for the Tensor engine); a group reads its offsets from its own
// rows of the index, column i of the operand from index[first partition of the group + i % G, i / G].
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

// kColumnGather: dst (the staged operand, [P, n]) from inputs[0] (the data view, [P, F]) through the index
// inputs[1] ([P, K] uint16). Throws std::out_of_range for an offset past the data's F columns.
void gatherColumns(const Bound& b);
// kColumnScatter: the staged result inputs[0] into dst (the data view) through the index inputs[1]; columns
// no offset names keep their values, and of two equal offsets the later column wins. The same error.
void scatterColumns(const Bound& b);

}  // namespace nki
