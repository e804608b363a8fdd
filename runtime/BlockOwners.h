// Which core's memory a block's base address belongs to, for frees that only
// have the address (the CPU allocator's raw_deallocate) and for host views
// (HostAccess.h). Lookups take one shard's lock, never a core's: a free on
// one core does not wait for another core's allocations; and a thread's last
// few answers serve again, without a lock, while the table is unchanged.
#pragma once

#include <cstddef>

namespace nrt {

struct OwnedSegment {
  int device = -1;        // -1: no segment starts at that address
  std::size_t bytes = 0;  // the segment's size, which bounds any view of it
};

void noteBlockOwner(const void* base, int device, std::size_t bytes);
void forgetBlockOwner(const void* base);
// The segment starting at `base`: the device that made it and its size.
OwnedSegment segmentAt(const void* base);
// The device that made the segment starting at `base`, or -1.
int blockOwner(const void* base);

}  // namespace nrt
