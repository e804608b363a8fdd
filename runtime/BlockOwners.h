// Which core's memory a block's base address belongs to, for frees that only
// have the address (the CPU allocator's raw_deallocate). Lookups take one
// shard's lock, never a core's: a free on one core does not wait for another
// core's allocations.
#pragma once

namespace nrt {

void noteBlockOwner(const void* base, int device);
void forgetBlockOwner(const void* base);
// The device that made the segment starting at `base`, or -1.
int blockOwner(const void* base);

}  // namespace nrt
