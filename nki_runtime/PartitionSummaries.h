// Instructions that take each partition as a whole: the Vector engine's top-8 search (max8,
// nc_find_index8, nc_match_replace8), statistics (bn_stats / bn_aggr) and partition shuffle
// (nc_stream_shuffle), and the GpSimd engine's nonzero_with_count, sequence_bounds, nc_n_gather and
// local_gather.
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
// Per segment id: the index of its segment's first element, then one past its last (a padding id, 0:
// the length, then -1), as AWS documents nki.isa.sequence_bounds. Ids compare as fp32 (exact below 2^24).
void sequenceBounds(const Bound& b);
// An index past its partition's data is an error (on the hardware, undefined).
void gatherInPartitions(const Bound& b);
// Each GpSimd core gathers within its 16 partitions, every partition with the core's indices: index j is
// partition j % 16's element j / 16 of the index tile (partition first), and picks elements
// [index * n, index * n + n) of each partition's data. The same error past the data.
void localGather(const Bound& b);

}  // namespace nki
