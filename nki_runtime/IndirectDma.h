// Indirect DMA: a transfer whose source rows along one axis are chosen by an
// index tile as the program runs (`tensor.ap(..., vector_offset=index_tile,
// indirect_dim=d)`), as the DMA engines' descriptor generation does on a
// NeuronCore. An index past the source tensor is an error, or (oob_mode=skip)
// leaves its destination row as it was.
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

// Runs an instruction with `indirect` set: inputs[0] is the source pattern of one row (size 1 along
// indirect_dim), inputs[1] the index tile; or, with indirect_destination, dst is that one-row pattern
// and source row i goes to dst row index[i] (a scatter; later rows win on repeated indices). Throws
// std::out_of_range for an index past the tensor it addresses.
void gather(const Bound& b);

}  // namespace nki
