#include "BlockOwners.h"

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
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

}  // namespace

void noteBlockOwner(const void* base, int device, std::size_t bytes) {
  Shard& shard = shardOf(base);
  std::lock_guard<std::mutex> lock(shard.mutex);
  shard.owners[base] = OwnedSegment{device, bytes};
}

void forgetBlockOwner(const void* base) {
  Shard& shard = shardOf(base);
  std::lock_guard<std::mutex> lock(shard.mutex);
  shard.owners.erase(base);
}

OwnedSegment segmentAt(const void* base) {
  Shard& shard = shardOf(base);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.owners.find(base);
  return it == shard.owners.end() ? OwnedSegment{} : it->second;
}

int blockOwner(const void* base) { return segmentAt(base).device; }

}  // namespace nrt
