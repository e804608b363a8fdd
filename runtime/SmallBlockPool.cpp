#include "SmallBlockPool.h"

#include <algorithm>
#include <cstdint>

#include "SpareNodes.h"

namespace nrt {

char* SmallBlockPool::segmentOf(const char* address) {
  const auto bits = reinterpret_cast<std::uintptr_t>(address);
  return reinterpret_cast<char*>(bits & ~static_cast<std::uintptr_t>(kSegmentBytes - 1));
}

void SmallBlockPool::insertFree(char* start, std::size_t bytes) {
  if (spare_size_nodes_.empty()) {
    free_by_size_.emplace(bytes, start);
  } else {
    auto node = std::move(spare_size_nodes_.back());
    spare_size_nodes_.pop_back();
    node.value() = {bytes, start};
    free_by_size_.insert(std::move(node));
  }
  if (spare_address_nodes_.empty()) {
    free_by_address_.emplace(start, bytes);
  } else {
    auto node = std::move(spare_address_nodes_.back());
    spare_address_nodes_.pop_back();
    node.key() = start;
    node.mapped() = bytes;
    free_by_address_.insert(std::move(node));
  }
}

void SmallBlockPool::eraseFree(ByAddress::iterator at) {
  keepSpare(spare_size_nodes_, free_by_size_.extract({at->second, at->first}));
  keepSpare(spare_address_nodes_, free_by_address_.extract(at));
}

char* SmallBlockPool::takeFromRuns(std::size_t bytes) {
  const auto fit = free_by_size_.lower_bound({bytes, nullptr});
  if (fit == free_by_size_.end()) return nullptr;
  const auto [run_bytes, start] = *fit;
  eraseFree(free_by_address_.find(start));
  if (run_bytes > bytes) insertFree(start + bytes, run_bytes - bytes);
  return start;
}

char* SmallBlockPool::take(std::size_t bytes, bool* first_use) {
  char* start = nullptr;
  for (int i = recent_count_ - 1; i >= 0; --i) {  // the newest first: its bytes are likeliest in cache
    if (recent_frees_[i].bytes != bytes) continue;
    start = recent_frees_[i].start;
    std::copy(recent_frees_.begin() + i + 1, recent_frees_.begin() + recent_count_, recent_frees_.begin() + i);
    --recent_count_;
    break;
  }
  if (!start) start = takeFromRuns(bytes);
  if (!start && recent_count_ > 0) {
    mergeRecentFrees();
    start = takeFromRuns(bytes);
  }
  if (!start) return nullptr;
  char* const segment = segmentOf(start);
  Segment& owner = segments_.at(segment);
  owner.used += bytes;
  const std::size_t granule = static_cast<std::size_t>(start - segment) / kGranule;
  *first_use = !owner.handed_out.test(granule);
  owner.handed_out.set(granule);
  return start;
}

void SmallBlockPool::addSegment(char* base) {
  segments_.emplace(base, Segment{});
  insertFree(base, kSegmentBytes);
}

void SmallBlockPool::give(char* block, std::size_t bytes) {
  segments_.at(segmentOf(block)).used -= bytes;
  if (recent_count_ == kRecentFrees) {
    merge(recent_frees_[0]);
    std::copy(recent_frees_.begin() + 1, recent_frees_.end(), recent_frees_.begin());
    --recent_count_;
  }
  recent_frees_[recent_count_++] = Block{block, bytes};
}

void SmallBlockPool::mergeRecentFrees() {
  for (int i = 0; i < recent_count_; ++i) merge(recent_frees_[i]);
  recent_count_ = 0;
}

void SmallBlockPool::merge(Block block) {
  char* const segment = segmentOf(block.start);
  char* start = block.start;
  std::size_t run = block.bytes;
  // Segments may lie next to each other in the address space: runs merge only within one.
  const auto next = free_by_address_.find(block.start + block.bytes);
  if (next != free_by_address_.end() && segmentOf(next->first) == segment) {
    run += next->second;
    eraseFree(next);
  }
  const auto after = free_by_address_.lower_bound(block.start);
  if (after != free_by_address_.begin()) {
    const auto before = std::prev(after);
    if (before->first + before->second == block.start && segmentOf(before->first) == segment) {
      start = before->first;
      run += before->second;
      eraseFree(before);
    }
  }
  insertFree(start, run);
}

void SmallBlockPool::releaseUnused(const std::function<void(char*, const std::vector<char*>&)>& release) {
  mergeRecentFrees();
  std::vector<char*> handed_out;
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (it->second.used != 0) {
      ++it;
      continue;
    }
    char* const base = it->first;
    eraseFree(free_by_address_.find(base));  // an unused segment is one free run
    handed_out.clear();
    for (std::size_t g = 0; g < kGranules; ++g) {
      if (it->second.handed_out.test(g)) handed_out.push_back(base + g * kGranule);
    }
    it = segments_.erase(it);
    release(base, handed_out);
  }
}

std::size_t SmallBlockPool::freeBytesBesideUsedBlocks() const {
  std::size_t bytes = 0;
  for (const auto& [base, segment] : segments_) {
    if (segment.used != 0) bytes += kSegmentBytes - segment.used;
  }
  return bytes;
}

}  // namespace nrt
