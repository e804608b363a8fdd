#include "BlockOwners.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <unordered_map>

namespace nrt {
namespace {

struct Shard {
  std::mutex mutex;
  std::unordered_map<const void*, OwnedSegment> owners;
};

constexpr std::size_t kShards = 64;

Shard& shardOf(const void* base) {
  static std::array<Shard, kShards>* shards = new std::array<Shard, kShards>();  // outlives static destruction
  // Segments are at least 64-byte aligned: drop the bits that never vary.
  const auto key = reinterpret_cast<std::uintptr_t>(base) >> 6;
  return (*shards)[std::hash<std::uintptr_t>{}(key) % kShards];
}

// Bumped after every change to the table: a thread's remembered answers hold while it is unchanged.
std::atomic<uint64_t> generation{0};

// An op looks up the same few blocks again and again (its inputs' and its output's); segments come and
// go far more rarely (a cached block is reused without a change of owner).
struct RecentLookups {
  static constexpr int kEntries = 4;
  uint64_t generation = ~uint64_t{0};
  std::array<std::pair<const void*, OwnedSegment>, kEntries> entries{};
  int next = 0;
};

OwnedSegment lookUp(const void* base) {
  Shard& shard = shardOf(base);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.owners.find(base);
  return it == shard.owners.end() ? OwnedSegment{} : it->second;
}

}  // namespace

void noteBlockOwner(const void* base, int device, std::size_t bytes) {
  {
    Shard& shard = shardOf(base);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.owners[base] = OwnedSegment{device, bytes};
  }
  generation.fetch_add(1, std::memory_order_acq_rel);
}

void forgetBlockOwner(const void* base) {
  {
    Shard& shard = shardOf(base);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.owners.erase(base);
  }
  generation.fetch_add(1, std::memory_order_acq_rel);
}

OwnedSegment segmentAt(const void* base) {
  thread_local RecentLookups recent;
  // Read before the lookup: an answer remembered under it was the table's at some time at or after it.
  const uint64_t now = generation.load(std::memory_order_acquire);
  if (recent.generation == now) {
    for (const auto& [address, segment] : recent.entries) {
      if (address == base && base != nullptr) return segment;
    }
  } else {
    recent = RecentLookups{};
    recent.generation = now;
  }
  const OwnedSegment found = lookUp(base);
  recent.entries[recent.next] = {base, found};
  recent.next = (recent.next + 1) % RecentLookups::kEntries;
  return found;
}

int blockOwner(const void* base) { return segmentAt(base).device; }

}  // namespace nrt
