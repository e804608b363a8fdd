// Instructions that take each partition as a whole: the Vector engine's top-8 search (max8,
// nc_find_index8, nc_match_replace8), statistics (bn_stats / bn_aggr) and partition shuffle
// (nc_stream_shuffle), and the GpSimd engine's nonzero_with_count and nc_n_gather.
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

void max8(const Bound& b);
void findIndex8(const Bound& b);
void matchReplace8(const Bound& b);
void bnStats(const Bound& b);
void bnAggr(const Bound& b);
void streamShuffle(const Bound& b);
void nonzeroWithCount(const Bound& b);
// An index past its partition's data is an error (on the hardware, undefined).
void gatherInPartitions(const Bound& b);

}  // namespace nki
