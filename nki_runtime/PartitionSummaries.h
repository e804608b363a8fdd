// Vector-engine instructions that summarise or search each partition as a whole: the top-8 search
// (max8, nc_find_index8, nc_match_replace8) and the statistics of bn_stats / bn_aggr.
#pragma once

#include "nki_runtime/Instructions.h"

namespace nki {

void max8(const Bound& b);
void findIndex8(const Bound& b);
void matchReplace8(const Bound& b);
void bnStats(const Bound& b);
void bnAggr(const Bound& b);

}  // namespace nki
