#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/BlockOwners.h"
#include "runtime/Copy.h"
#include "runtime/DeviceMemory.h"
#include "runtime/SmallBlockPool.h"
#include "runtime/Stream.h"

using nrt::DeviceMemory;

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(DeviceMemory, StatsFollowAllocateAndFree) {
  DeviceMemory memory(0, 64 * kMiB);
  void* a = memory.allocate(1000);
  auto stats = memory.stats();
  EXPECT_EQ(stats.allocated_bytes.current, 1024);  // rounded to 512
  EXPECT_EQ(stats.requested_bytes.current, 1000);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<int64_t>(2 * kMiB));  // a small-block segment
  EXPECT_EQ(stats.inactive_split_bytes.current, static_cast<int64_t>(2 * kMiB - 1024));
  memory.free(a);
  stats = memory.stats();
  EXPECT_EQ(stats.allocated_bytes.current, 0);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<int64_t>(2 * kMiB));  // cached
  EXPECT_EQ(stats.inactive_split_bytes.current, 0);
  EXPECT_EQ(stats.allocated_bytes.peak, 1024);
  memory.emptyCache();
  EXPECT_EQ(memory.stats().reserved_bytes.current, 0);
}

TEST(DeviceMemory, FreedBlocksAreReused) {
  DeviceMemory memory(0, 64 * kMiB);
  void* a = memory.allocate(3 * kMiB);
  memory.free(a);
  void* b = memory.allocate(3 * kMiB - 100);
  EXPECT_EQ(a, b);
  EXPECT_EQ(memory.stats().num_device_alloc, 1);
  memory.free(b);
}

TEST(DeviceMemory, CapacityIsEnforcedAndNothingIsHarmed) {
  DeviceMemory memory(0, 8 * kMiB);
  auto* a = static_cast<unsigned char*>(memory.allocate(6 * kMiB));
  std::memset(a, 7, 6 * kMiB);
  EXPECT_THROW(memory.allocate(4 * kMiB), nrt::OutOfMemory);
  EXPECT_EQ(memory.stats().num_ooms, 1);
  EXPECT_EQ(a[6 * kMiB - 1], 7);
  void* b = memory.allocate(2 * kMiB);  // still usable
  EXPECT_NE(b, nullptr);
  memory.free(a);
  memory.free(b);
}

TEST(DeviceMemory, CacheIsReleasedBeforeFailing) {
  DeviceMemory memory(0, 8 * kMiB);
  memory.free(memory.allocate(7 * kMiB));  // an 8 MiB segment, too large to reuse below
  void* b = memory.allocate(2 * kMiB);     // only fits once the cached segment goes
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(memory.stats().num_alloc_retries, 1);
  memory.free(b);
}

TEST(DeviceMemory, ExternalChargesCountAgainstCapacity) {
  DeviceMemory memory(0, 4 * kMiB);
  std::vector<char> adopted(3 * kMiB);
  memory.chargeExternal(adopted.data(), adopted.size());
  EXPECT_THROW(memory.allocate(2 * kMiB), nrt::OutOfMemory);
  memory.releaseExternal(adopted.data(), adopted.size());
  EXPECT_EQ(memory.stats().allocated_bytes.current, 0);
}

TEST(DeviceMemory, ThreadSafeUnderContention) {
  DeviceMemory memory(0, 256 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&memory] {
      for (int i = 0; i < 2000; ++i) memory.free(memory.allocate(512 + (i % 7) * 4096));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(memory.stats().allocated_bytes.current, 0);
  EXPECT_EQ(memory.stats().allocation.allocated, 8000);
}

TEST(DeviceMemory, OwnsItsBlocks) {
  DeviceMemory memory(0, 8 * kMiB);
  auto* a = static_cast<char*>(memory.allocate(4096));
  EXPECT_TRUE(memory.owns(a + 100));
  int local = 0;
  EXPECT_FALSE(memory.owns(&local));
  memory.free(a);
}

TEST(Copy, LargeCopiesAreExact) {
  std::vector<unsigned> src(5'000'000), dst(5'000'000, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned>(i * 2654435761u);
  nrt::copyBytes(dst.data(), src.data(), src.size() * sizeof(unsigned));
  EXPECT_EQ(src, dst);
}

TEST(Event, ElapsedTimeNeedsTimingAndRecording) {
  nrt::Event start(true), end(true), untimed(false);
  EXPECT_THROW(start.elapsedMs(end), std::logic_error);
  start.record(0, 0);
  end.record(0, 0);
  EXPECT_GE(start.elapsedMs(end), 0.0);
  untimed.record(0, 0);
  EXPECT_THROW(start.elapsedMs(untimed), std::logic_error);
}

TEST(DeviceMemory, TryAllocateFailsQuietlyAndKeepsTheCache) {
  DeviceMemory memory(0, 8 * kMiB);
  memory.free(memory.allocate(7 * kMiB));  // 8 MiB cached
  EXPECT_EQ(memory.tryAllocate(2 * kMiB), nullptr);
  auto stats = memory.stats();
  EXPECT_EQ(stats.num_ooms, 0);
  EXPECT_EQ(stats.reserved_bytes.current, static_cast<int64_t>(8 * kMiB));
  void* reused = memory.tryAllocate(5 * kMiB);  // served by the cached segment
  EXPECT_NE(reused, nullptr);
  EXPECT_TRUE(memory.freeIfOwned(reused));
  EXPECT_FALSE(memory.freeIfOwned(reused));
}

TEST(DeviceMemory, AReusedLargerBlockChargesOnlyTheRequest) {
  DeviceMemory memory(0, 64 * kMiB);
  memory.free(memory.allocate(4 * kMiB));
  void* b = memory.allocate(3 * kMiB);  // reuses the 4 MiB segment
  EXPECT_EQ(memory.stats().allocated_bytes.current, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(memory.stats().reserved_bytes.current, static_cast<int64_t>(4 * kMiB));
  memory.free(b);
  EXPECT_EQ(memory.stats().allocated_bytes.current, 0);
}

TEST(DeviceMemory, SmallBlocksShareSegmentsAndMergeWhenFreed) {
  DeviceMemory memory(0, 64 * kMiB);
  auto* a = static_cast<char*>(memory.allocate(kMiB / 2 - 100));
  auto* b = static_cast<char*>(memory.allocate(kMiB / 2));
  auto* c = static_cast<char*>(memory.allocate(kMiB));
  EXPECT_EQ(b, a + kMiB / 2);  // carved one after the other from one segment, which they fill
  EXPECT_EQ(c, b + kMiB / 2);
  EXPECT_EQ(memory.stats().segment.current, 1);
  memory.free(a);
  memory.free(b);
  void* d = memory.allocate(kMiB);  // a's and b's blocks merged
  EXPECT_EQ(d, a);
  EXPECT_EQ(memory.stats().segment.current, 1);
  void* same_size = memory.allocate(512);  // a new segment: none is free in the first
  memory.free(same_size);
  EXPECT_EQ(memory.allocate(512), same_size);  // the block freed last serves its size again
  memory.free(same_size);
  memory.free(c);
  memory.free(d);
  // The first segment is one free run again: two 1 MiB blocks fit in it.
  void* e = memory.allocate(kMiB);
  void* f = memory.allocate(kMiB);
  EXPECT_EQ(memory.stats().segment.current, 2);
  memory.free(e);
  memory.free(f);
  memory.emptyCache();  // neither segment holds a block: both go back to the host
  EXPECT_EQ(memory.stats().segment.current, 0);
  EXPECT_EQ(memory.stats().reserved_bytes.current, 0);
}

TEST(DeviceMemory, AGrowingTensorReusesItsSegments) {
  // A KV cache one token longer each step: the block freed by the last step merges with the free space
  // after it, and the next, larger block fits there again.
  DeviceMemory memory(0, 64 * kMiB);
  void* kv = memory.allocate(512);
  for (std::size_t bytes = 1024; bytes <= 512 * 1024; bytes += 512) {
    void* longer = memory.allocate(bytes);
    memory.free(kv);
    kv = longer;
  }
  EXPECT_LE(memory.stats().reserved_bytes.current, static_cast<int64_t>(2 * 2 * kMiB));
  memory.free(kv);
  memory.emptyCache();
  EXPECT_EQ(memory.stats().reserved_bytes.current, 0);
}

TEST(SmallBlockPool, BlocksNeverMergeAcrossTouchingSegments) {
  // Two segments that touch in the address space, both full; the end of the first and the start of
  // the second are freed. A run merged across them would serve a 1 MiB block straddling both.
  constexpr std::size_t kSegment = nrt::SmallBlockPool::kSegmentBytes;
  auto* memory = static_cast<char*>(std::aligned_alloc(kSegment, 2 * kSegment));
  nrt::SmallBlockPool pool;
  pool.addSegment(memory);
  pool.addSegment(memory + kSegment);
  bool first_use = false;
  std::vector<char*> blocks;
  for (std::size_t bytes : {kMiB, kMiB / 2, kMiB / 2, kMiB / 2, kMiB / 2, kMiB}) {
    blocks.push_back(pool.take(bytes, &first_use));
  }
  EXPECT_EQ(blocks[3], memory + kSegment);
  pool.give(blocks[2], kMiB / 2);
  pool.give(blocks[3], kMiB / 2);
  EXPECT_EQ(pool.take(kMiB, &first_use), nullptr);  // two 512 KiB runs, one in each segment
  EXPECT_NE(pool.take(kMiB / 2, &first_use), nullptr);
  std::free(memory);
}

TEST(DeviceMemory, BlockOwnersNameTheCoreOfEverySegment) {
  DeviceMemory core2(2, 64 * kMiB), core3(3, 64 * kMiB);
  void* a = core2.allocate(1000);
  void* b = core3.allocate(3 * kMiB);
  int host_block = 0;
  EXPECT_EQ(nrt::blockOwner(a), 2);
  EXPECT_EQ(nrt::blockOwner(b), 3);
  EXPECT_EQ(nrt::blockOwner(&host_block), -1);
  void* a2 = core2.allocate(5000);  // carved from a's segment: its address is the core's too
  EXPECT_EQ(nrt::blockOwner(a2), 2);
  core2.free(a2);
  core2.free(a);
  EXPECT_EQ(nrt::blockOwner(a), 2);  // cached segments stay the core's
  core2.emptyCache();
  EXPECT_EQ(nrt::blockOwner(a), -1);  // released to the host
  EXPECT_EQ(nrt::blockOwner(a2), -1);
  core3.free(b);
}

TEST(DeviceMemory, ClaimRunsBeforeTheFirstSegmentAndAgainAfterAFailure) {
  int calls = 0;
  bool refuse = true;
  DeviceMemory memory(0, 64 * kMiB, [&] {
    ++calls;
    if (refuse) throw std::runtime_error("core busy");
  });
  EXPECT_THROW(memory.allocate(100), std::runtime_error);
  EXPECT_EQ(memory.stats().allocation.current, 0);
  refuse = false;
  void* p = memory.allocate(100);
  void* q = memory.allocate(100);
  EXPECT_EQ(calls, 2);
  memory.free(p);
  memory.free(q);
}
