#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/DeviceMemory.h"
#include "runtime/HostAccess.h"

using nrt::DeviceMemory;

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(HostAccess, EmulatedDeviceMemoryIsHostAddressable) { EXPECT_TRUE(nrt::hostAddressable()); }

TEST(HostAccess, AViewOfALiveBlockIsItsAddress) {
  DeviceMemory memory(1, 64 * kMiB);
  void* small = memory.allocate(1000);
  void* large = memory.allocate(3 * kMiB);
  EXPECT_EQ(nrt::hostView(memory, small, 1000), small);
  EXPECT_EQ(nrt::hostView(memory, large, 3 * kMiB), large);
  // The rounding is part of the block.
  EXPECT_EQ(nrt::hostView(memory, small, DeviceMemory::roundSize(1000)), small);
  memory.free(small);
  memory.free(large);
}

TEST(HostAccess, AViewInsideABlockIsItsAddress) {
  DeviceMemory memory(1, 64 * kMiB);
  auto* block = static_cast<char*>(memory.allocate(4096));
  EXPECT_EQ(nrt::hostView(memory, block + 1024, 2048), block + 1024);
  EXPECT_THROW(nrt::hostView(memory, block + 1024, 4096), nrt::NotDeviceMemory);  // runs past the block
  memory.free(block);
}

TEST(HostAccess, AdoptedMemoryIsTheCoresUntilReleased) {
  DeviceMemory memory(1, 64 * kMiB);
  std::vector<char> host(8192);
  EXPECT_THROW(nrt::hostView(memory, host.data(), host.size()), nrt::NotDeviceMemory);
  memory.chargeExternal(host.data(), host.size());
  memory.chargeExternal(host.data(), host.size());  // adopted twice (a graph returning one buffer twice)
  EXPECT_EQ(nrt::hostView(memory, host.data(), host.size()), host.data());
  EXPECT_EQ(nrt::hostView(memory, host.data() + 100, 200), host.data() + 100);
  memory.releaseExternal(host.data(), host.size());
  EXPECT_EQ(nrt::hostView(memory, host.data(), host.size()), host.data());
  memory.releaseExternal(host.data(), host.size());
  EXPECT_THROW(nrt::hostView(memory, host.data(), host.size()), nrt::NotDeviceMemory);
}

TEST(HostAccess, MemoryThatIsNotTheCoresIsRefusedClearly) {
  DeviceMemory core1(1, 64 * kMiB), core2(2, 64 * kMiB);
  void* other_core = core2.allocate(1000);
  int on_stack = 0;
  EXPECT_THROW(nrt::hostView(core1, other_core, 1000), nrt::NotDeviceMemory);
  EXPECT_THROW(nrt::hostView(core2, other_core, 64 * kMiB), nrt::NotDeviceMemory);  // larger than the block
  try {
    nrt::hostView(core1, &on_stack, sizeof(on_stack));
    FAIL() << "a stack address was granted a host view";
  } catch (const nrt::NotDeviceMemory& e) {
    EXPECT_NE(std::string(e.what()).find("not device memory of NeuronCore 1"), std::string::npos) << e.what();
  }
  core2.free(other_core);
}

TEST(HostAccess, AnEmptyRangeNeedsNoMemory) {
  DeviceMemory memory(1, 64 * kMiB);
  EXPECT_EQ(nrt::hostView(memory, nullptr, 0), nullptr);
}
