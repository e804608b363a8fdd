#include "DeviceMemory.h"

#include "BlockOwners.h"
#include "SpareNodes.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <utility>

namespace nrt {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = 2 * kMiB;
constexpr std::size_t kAlignment = 64;  // a cache line, enough for AVX-512 loads

// Large segments are backed by transparent huge pages where the kernel allows
// it: first touch then costs one fault per 2 MiB instead of one per 4 KiB,
// which on a VM is the difference between milliseconds and a second for a
// model's weights.
void* allocateSegment(std::size_t rounded) {
  if (rounded < kLargeRound) return std::aligned_alloc(kAlignment, rounded);
  void* ptr = std::aligned_alloc(kLargeRound, rounded);
  if (ptr) madvise(ptr, rounded, MADV_HUGEPAGE);
  return ptr;
}

std::string formatBytes(std::size_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed;
  if (bytes >= (std::size_t{1} << 30)) out << bytes / double(std::size_t{1} << 30) << " GiB";
  else out << bytes / double(kMiB) << " MiB";
  return out.str();
}

// Whether [ptr, ptr + size) lies in [base, base + base_size).
bool within(const void* ptr, std::size_t size, const void* base, std::size_t base_size) {
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  const auto at = reinterpret_cast<std::uintptr_t>(ptr);
  return at >= begin && at - begin <= base_size && size <= base_size - (at - begin);
}

}  // namespace

void Stat::increase(int64_t amount) {
  current += amount;
  allocated += amount;
  if (current > peak) peak = current;
}

void Stat::decrease(int64_t amount) {
  current -= amount;
  freed += amount;
}

DeviceMemory::DeviceMemory(int device, std::size_t capacity, std::function<void()> claim)
    : device_(device), hbm_bytes_(capacity), capacity_(capacity), claim_(std::move(claim)) {}

void DeviceMemory::claimLocked() {
  if (claimed_) return;
  if (claim_) claim_();
  claimed_ = true;
}

DeviceMemory::~DeviceMemory() {
  // Live blocks may still be referenced by tensors that outlive the runtime at
  // process exit; only the cache is returned.
  std::lock_guard<std::mutex> lock(mutex_);
  releaseCachedLocked();
}

std::size_t DeviceMemory::roundSize(std::size_t size) {
  // Small blocks round finely; large ones to 2 MiB so that the cache can serve
  // the slightly different sizes that training steps produce.
  if (size <= kMiB) return ((size + kSmallRound - 1) / kSmallRound) * kSmallRound;
  return ((size + kLargeRound - 1) / kLargeRound) * kLargeRound;
}

std::size_t DeviceMemory::chargedSize(std::size_t size) {
  return ((size + kSmallRound - 1) / kSmallRound) * kSmallRound;
}

void* DeviceMemory::takeCached(std::size_t rounded) {
  // Best fit, but never hand out more than twice what was asked: a large
  // cached block would otherwise be pinned by a small tensor.
  auto it = cached_.lower_bound(rounded);
  if (it == cached_.end() || it->first > 2 * rounded) return nullptr;
  auto node = cached_.extract(it);
  void* ptr = node.mapped();
  keepSpare(spare_cached_, std::move(node));
  return ptr;
}

void* DeviceMemory::allocate(std::size_t size) {
  if (size == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  return allocateLocked(size, /*quiet=*/false);
}

void* DeviceMemory::tryAllocate(std::size_t size) {
  if (size == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  return allocateLocked(size, /*quiet=*/true);
}

void* DeviceMemory::newSegment(std::size_t bytes, bool quiet) {
  auto fits = [&] { return static_cast<std::size_t>(stats_.reserved_bytes.current) + bytes <= capacity_; };
  if (!fits()) {
    if (quiet) return nullptr;
    if (releaseCachedLocked() > 0) ++stats_.num_alloc_retries;
    if (!fits()) throwOutOfMemory(bytes);
  }
  claimLocked();
  void* ptr = allocateSegment(bytes);
  if (!ptr) {
    if (quiet) return nullptr;
    throwOutOfMemory(bytes);
  }
  ++stats_.num_device_alloc;
  stats_.segment.increase(1);
  stats_.reserved_bytes.increase(static_cast<int64_t>(bytes));
  return ptr;
}

void* DeviceMemory::takeSmall(std::size_t rounded, bool quiet) {
  bool first_use = false;
  char* block = small_.take(rounded, &first_use);
  if (!block) {
    char* segment = static_cast<char*>(newSegment(SmallBlockPool::kSegmentBytes, quiet));
    if (!segment) return nullptr;
    small_.addSegment(segment);
    block = small_.take(rounded, &first_use);
  }
  // The owner table learns an address once, with the rest of its segment as the bound of views of it:
  // blocks that split and merge again at known addresses leave the table (and its readers' recent
  // answers) unchanged.
  if (first_use) {
    const auto offset = reinterpret_cast<std::uintptr_t>(block) % SmallBlockPool::kSegmentBytes;
    noteBlockOwner(block, device_, SmallBlockPool::kSegmentBytes - offset);
  }
  return block;
}

void* DeviceMemory::takeLarge(std::size_t rounded, bool quiet) {
  void* ptr = takeCached(rounded);
  if (ptr) return ptr;
  ptr = newSegment(rounded, quiet);
  if (!ptr) return nullptr;
  segments_.emplace(ptr, rounded);
  noteBlockOwner(ptr, device_, rounded);
  return ptr;
}

void* DeviceMemory::allocateLocked(std::size_t size, bool quiet) {
  const std::size_t rounded = roundSize(size);
  const bool small = rounded <= SmallBlockPool::kLargestBlock;
  void* ptr = small ? takeSmall(rounded, quiet) : takeLarge(rounded, quiet);
  if (!ptr) return nullptr;
  const LiveBlock block{size, small ? rounded : segments_.at(ptr)};
  // As CUDA's allocator does, a tensor is charged its request rounded to
  // 512 B; the rest of its block (2 MiB rounding, or a reused block up to
  // twice the request) counts as reserved only.
  const auto charged = static_cast<int64_t>(chargedSize(size));
  if (spare_live_.empty()) {
    live_.emplace(ptr, block);
  } else {
    auto node = std::move(spare_live_.back());
    spare_live_.pop_back();
    node.key() = ptr;
    node.mapped() = block;
    live_.insert(std::move(node));
  }
  stats_.allocation.increase(1);
  stats_.active.increase(1);
  stats_.allocated_bytes.increase(charged);
  stats_.active_bytes.increase(charged);
  stats_.requested_bytes.increase(static_cast<int64_t>(size));
  return ptr;
}

void DeviceMemory::free(void* ptr) { freeIfOwned(ptr); }

bool DeviceMemory::freeIfOwned(void* ptr) {
  if (!ptr) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;  // not ours, or already freed: never corrupt the cache
  auto live = live_.extract(it);
  const LiveBlock block = live.mapped();
  const std::size_t requested = block.requested;
  keepSpare(spare_live_, std::move(live));
  const auto charged = static_cast<int64_t>(chargedSize(requested));
  stats_.allocation.decrease(1);
  stats_.active.decrease(1);
  stats_.allocated_bytes.decrease(charged);
  stats_.active_bytes.decrease(charged);
  stats_.requested_bytes.decrease(static_cast<int64_t>(requested));
  if (block.bytes <= SmallBlockPool::kLargestBlock) {
    small_.give(static_cast<char*>(ptr), block.bytes);
    return true;
  }
  // First among equal sizes, so the next request of this size takes the block
  // freed last, whose bytes are likeliest still in the CPU caches (as a heap's
  // free lists do); lower_bound in takeCached finds it.
  const std::size_t size = block.bytes;
  if (spare_cached_.empty()) {
    cached_.emplace_hint(cached_.lower_bound(size), size, ptr);
  } else {
    auto node = std::move(spare_cached_.back());
    spare_cached_.pop_back();
    node.key() = size;
    node.mapped() = ptr;
    cached_.insert(cached_.lower_bound(size), std::move(node));
  }
  return true;
}

void DeviceMemory::chargeExternal(const void* base, std::size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  claimLocked();
  if (static_cast<std::size_t>(stats_.reserved_bytes.current) + size > capacity_) {
    if (releaseCachedLocked() > 0) ++stats_.num_alloc_retries;
    if (static_cast<std::size_t>(stats_.reserved_bytes.current) + size > capacity_) throwOutOfMemory(size);
  }
  const auto bytes = static_cast<int64_t>(size);
  stats_.allocation.increase(1);
  stats_.active.increase(1);
  stats_.segment.increase(1);
  stats_.allocated_bytes.increase(bytes);
  stats_.active_bytes.increase(bytes);
  stats_.requested_bytes.increase(bytes);
  stats_.reserved_bytes.increase(bytes);
  external_.emplace(base, size);
}

void DeviceMemory::releaseExternal(const void* base, std::size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [first, last] = external_.equal_range(base);
  for (auto it = first; it != last; ++it) {
    if (it->second == size) {
      external_.erase(it);
      break;
    }
  }
  const auto bytes = static_cast<int64_t>(size);
  stats_.allocation.decrease(1);
  stats_.active.decrease(1);
  stats_.segment.decrease(1);
  stats_.allocated_bytes.decrease(bytes);
  stats_.active_bytes.decrease(bytes);
  stats_.requested_bytes.decrease(bytes);
  stats_.reserved_bytes.decrease(bytes);
}

std::size_t DeviceMemory::releaseCachedLocked() {
  std::size_t released = 0;
  auto release = [&](void* base, std::size_t bytes) {
    std::free(base);
    released += bytes;
    ++stats_.num_device_free;
    stats_.segment.decrease(1);
    stats_.reserved_bytes.decrease(static_cast<int64_t>(bytes));
  };
  for (auto& [size, ptr] : cached_) {
    segments_.erase(ptr);
    forgetBlockOwner(ptr);
    release(ptr, size);
  }
  cached_.clear();
  small_.releaseUnused([&](char* base, const std::vector<char*>& handed_out) {
    for (char* address : handed_out) forgetBlockOwner(address);
    release(base, SmallBlockPool::kSegmentBytes);
  });
  return released;
}

void DeviceMemory::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  releaseCachedLocked();
}

void DeviceMemory::throwOutOfMemory(std::size_t rounded) {
  ++stats_.num_ooms;
  std::ostringstream message;
  message << "NeuronCore " << device_ << " is out of memory: tried to allocate " << formatBytes(rounded)
          << "; the core has " << formatBytes(capacity_) << " of HBM, of which "
          << formatBytes(static_cast<std::size_t>(stats_.allocated_bytes.current)) << " is allocated by tensors and "
          << formatBytes(static_cast<std::size_t>(stats_.reserved_bytes.current)) << " is reserved by the caching "
          << "allocator. Free tensors, call torch.neuron.empty_cache(), or use a smaller batch.";
  throw OutOfMemory(message.str());
}

MemoryStats DeviceMemory::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats stats = stats_;
  // Derived from the pool when asked; its peak is not tracked between queries.
  stats.inactive_split_bytes.current = static_cast<int64_t>(small_.freeBytesBesideUsedBlocks());
  stats.inactive_split_bytes.peak = std::max(stats.inactive_split_bytes.peak, stats.inactive_split_bytes.current);
  return stats;
}

void DeviceMemory::resetPeakStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Stat* s : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.allocated_bytes,
                  &stats_.requested_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                  &stats_.inactive_split_bytes}) {
    s->resetPeak();
  }
}

void DeviceMemory::resetAccumulatedStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Stat* s : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.allocated_bytes,
                  &stats_.requested_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                  &stats_.inactive_split_bytes}) {
    s->resetAccumulated();
  }
  stats_.num_alloc_retries = stats_.num_ooms = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

std::size_t DeviceMemory::freeBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes.current);
  return reserved >= capacity_ ? 0 : capacity_ - reserved;
}

bool DeviceMemory::owns(const void* ptr, std::size_t size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [base, block] : live_) {
    if (within(ptr, size, base, block.bytes)) return true;
  }
  return false;
}

bool DeviceMemory::holdsExternal(const void* ptr, std::size_t size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Adopted ranges are distinct host allocations, so only the ones starting
  // at the nearest address at or below ptr can hold it.
  auto it = external_.upper_bound(ptr);
  if (it == external_.begin()) return false;
  const void* base = std::prev(it)->first;
  for (auto [first, last] = external_.equal_range(base); first != last; ++first) {
    if (within(ptr, size, base, first->second)) return true;
  }
  return false;
}

void DeviceMemory::setFraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw std::invalid_argument("memory fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = static_cast<std::size_t>(static_cast<double>(hbm_bytes_) * fraction);
}

}  // namespace nrt
