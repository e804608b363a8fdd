// The small blocks of one core's memory (at most 1 MiB each), carved out of
// 2 MiB segments as CUDA's caching allocator does, and merged again with free
// neighbours when they are freed.
//
// A segment per block, cached by size, served a growing tensor badly: a KV
// cache one token longer each step never fits the blocks the previous step
// freed, so every step took fresh memory (page faults) and the cache grew
// until the capacity forced a release (a 200-token fp32 decode of a 125M
// Llama: 1.5 GiB reserved for 15 MiB of KV cache, 33 ms per token on its
// first run against 19 on a repeat). Carved blocks that merge on free serve it from the same
// segments every step.
//
// The last few blocks freed wait unmerged for a request of their exact size:
// an op's output freed while the next op allocates its own then costs no
// tree updates (eager a + b: 1.56x -> 1.41x the CPU device's time).
//
// No locking and no statistics: DeviceMemory does both.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nrt {

class SmallBlockPool {
 public:
  static constexpr std::size_t kSegmentBytes = std::size_t{2} << 20;
  static constexpr std::size_t kLargestBlock = std::size_t{1} << 20;
  static constexpr std::size_t kGranule = 512;  // every block's size and offset is a multiple of it

  // A block of exactly `bytes` (a multiple of kGranule, at most kLargestBlock) from the free space, or
  // nullptr when no segment has a large enough free run. `first_use` tells whether no block of any
  // size ever started at that address in its segment before.
  char* take(std::size_t bytes, bool* first_use);
  // A fresh segment of kSegmentBytes at `base` (aligned to kSegmentBytes), all free.
  void addSegment(char* base);
  // Returns a block that take() handed out.
  void give(char* block, std::size_t bytes);
  // Removes the segments in which no block is in use, calling release(base, addresses blocks ever
  // started at) for each.
  void releaseUnused(const std::function<void(char*, const std::vector<char*>&)>& release);
  // Free bytes in segments that also hold blocks in use (CUDA's inactive_split_bytes).
  std::size_t freeBytesBesideUsedBlocks() const;

 private:
  static constexpr std::size_t kGranules = kSegmentBytes / kGranule;
  struct Segment {
    std::size_t used = 0;
    std::bitset<kGranules> handed_out;  // granules at which a block ever started
  };
  using BySize = std::set<std::pair<std::size_t, char*>>;
  using ByAddress = std::map<char*, std::size_t>;

  static constexpr int kRecentFrees = 8;
  struct Block {
    char* start = nullptr;
    std::size_t bytes = 0;
  };

  static char* segmentOf(const char* address);
  char* takeFromRuns(std::size_t bytes);
  void merge(Block block);  // into the free runs, with its free neighbours
  void mergeRecentFrees();
  void insertFree(char* start, std::size_t bytes);
  void eraseFree(ByAddress::iterator at);

  std::unordered_map<char*, Segment> segments_;
  std::array<Block, kRecentFrees> recent_frees_;  // oldest first; not yet in the free runs
  int recent_count_ = 0;
  BySize free_by_size_;        // best fit: the smallest run that fits, lowest address first
  ByAddress free_by_address_;  // for merging with neighbours
  // Nodes kept from erasures for the next insertion: a loop of small ops splits and merges runs
  // without going through the heap.
  std::vector<BySize::node_type> spare_size_nodes_;
  std::vector<ByAddress::node_type> spare_address_nodes_;
};

}  // namespace nrt
