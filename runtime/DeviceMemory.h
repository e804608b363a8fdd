// Device memory of one emulated NeuronCore: a caching allocator over host
// memory that enforces the core's HBM capacity and keeps CUDA-style stats.
//
// Freed blocks stay cached (reserved) and are reused: blocks of up to 1 MiB are
// carved from 2 MiB segments and merge again when freed (SmallBlockPool.h),
// larger ones have a segment each, reused for requests of a close size. So
// steady-state training and decoding allocate no host memory at all. Exceeding the
// capacity first releases the cache, then fails with OutOfMemory; nothing that
// is allocated is ever touched by a failed request.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "SmallBlockPool.h"

namespace nrt {

class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // total increments
  int64_t freed = 0;      // total decrements
  void increase(int64_t amount);
  void decrease(int64_t amount);
  void resetAccumulated() { allocated = freed = 0; }
  void resetPeak() { peak = current; }
};

struct MemoryStats {
  Stat allocation;       // live blocks handed out
  Stat segment;          // host allocations held (in use or cached)
  Stat active;           // == allocation (no stream-deferred frees in the emulator)
  Stat allocated_bytes;  // bytes of live blocks (rounded)
  Stat requested_bytes;  // bytes callers asked for
  Stat reserved_bytes;   // bytes of all segments
  Stat active_bytes;
  Stat inactive_split_bytes;
  int64_t num_alloc_retries = 0;  // a request that had to release the cache first
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;   // host allocations made
  int64_t num_device_free = 0;    // host allocations released
};

class DeviceMemory {
 public:
  // `claim` runs before the core's first memory is taken and may throw (the
  // core belongs to another process); it runs again on the next request.
  DeviceMemory(int device, std::size_t capacity, std::function<void()> claim = {});
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Returns nullptr for size 0. Throws OutOfMemory when the capacity is hit.
  void* allocate(std::size_t size);
  // As allocate(), but returns nullptr instead of releasing the cache or
  // failing when the request does not fit (for optional placements).
  void* tryAllocate(std::size_t size);
  void free(void* ptr);
  // Frees ptr if it is a live block of this core; returns whether it was.
  bool freeIfOwned(void* ptr);
  // Charges memory that was allocated elsewhere (an ATen CPU kernel's output
  // that the device adopts without copying). Throws OutOfMemory. The core
  // remembers the range as its own until it is released, so that host views
  // of it are granted (HostAccess.h); one range may be adopted more than once.
  void chargeExternal(const void* base, std::size_t size);
  void releaseExternal(const void* base, std::size_t size);
  // True when [ptr, ptr + size) lies in memory charged with chargeExternal.
  bool holdsExternal(const void* ptr, std::size_t size) const;

  void emptyCache();
  MemoryStats stats() const;
  void resetPeakStats();
  void resetAccumulatedStats();
  std::size_t capacity() const { return capacity_; }
  std::size_t freeBytes() const;  // capacity minus reserved
  // Limits the usable capacity to a fraction of the HBM (set_per_process_memory_fraction).
  void setFraction(double fraction);
  int device() const { return device_; }
  // True when [ptr, ptr + size) lies in a block that this core handed out.
  bool owns(const void* ptr, std::size_t size = 1) const;

  static std::size_t roundSize(std::size_t size);
  // What a block of `size` bytes adds to allocated_bytes (CUDA's 512 B rounding).
  static std::size_t chargedSize(std::size_t size);

 private:
  struct LiveBlock {
    std::size_t requested = 0;
    std::size_t bytes = 0;  // the block's: a small one's rounded size, else its segment's
  };
  // Returns a cached segment of at least `rounded` bytes, or nullptr.
  void* takeCached(std::size_t rounded);
  void* allocateLocked(std::size_t size, bool quiet);
  // A block of `rounded` bytes carved from the small pool (rounded <= 1 MiB), or from its own segment.
  // nullptr when quiet and the block does not fit.
  void* takeSmall(std::size_t rounded, bool quiet);
  void* takeLarge(std::size_t rounded, bool quiet);
  // Host memory for a new segment of `bytes`, charged to the reserve; releases the cache first when
  // the capacity requires it. nullptr when quiet and it does not fit.
  void* newSegment(std::size_t bytes, bool quiet);
  // Returns the bytes released.
  std::size_t releaseCachedLocked();
  [[noreturn]] void throwOutOfMemory(std::size_t rounded);
  void claimLocked();

  const int device_;
  const std::size_t hbm_bytes_;
  std::size_t capacity_;
  std::function<void()> claim_;
  bool claimed_ = false;
  mutable std::mutex mutex_;
  std::unordered_map<void*, std::size_t> segments_;   // every large segment held -> its size
  std::unordered_map<void*, LiveBlock> live_;         // blocks in use
  std::multimap<std::size_t, void*> cached_;          // free large segments by size
  SmallBlockPool small_;                              // blocks of at most 1 MiB, carved from 2 MiB segments
  std::multimap<const void*, std::size_t> external_;  // adopted ranges by address -> their size
  // Map nodes kept from erasures for the next insertion: an allocation and a free in a loop of small
  // ops then move nodes between live_ and cached_ instead of going through the heap four times.
  std::vector<std::unordered_map<void*, LiveBlock>::node_type> spare_live_;
  std::vector<std::multimap<std::size_t, void*>::node_type> spare_cached_;
  MemoryStats stats_;
};

}  // namespace nrt
