#include "aten/core/NeuronHostAllocator.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/Copy.h"

namespace torch_neuronx {
namespace {

constexpr size_t kAlignment = 4096;  // page-aligned, as DMA-able host memory is

struct PinnedPool {
  std::mutex mutex;
  std::map<const char*, size_t> blocks;      // every block held -> size
  std::multimap<size_t, void*> free_blocks;  // cached by size
  at::HostStats stats;
};

PinnedPool& pool() {
  static PinnedPool* instance = new PinnedPool();  // outlives tensors freed at exit
  return *instance;
}

void releasePinned(void* ptr) {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.blocks.find(static_cast<const char*>(ptr));
  if (it == p.blocks.end()) return;
  p.stats.active_requests.decrease(1);
  p.stats.active_bytes.decrease(it->second);
  p.free_blocks.emplace(it->second, ptr);
}

}  // namespace

c10::DataPtr NeuronHostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &releasePinned, c10::Device(c10::DeviceType::CPU)};
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  void* ptr = nullptr;
  auto it = p.free_blocks.lower_bound(rounded);
  if (it != p.free_blocks.end() && it->first <= 2 * rounded) {
    ptr = it->second;
    p.free_blocks.erase(it);
  } else {
    ptr = std::aligned_alloc(kAlignment, rounded);
    TORCH_CHECK_WITH(OutOfMemoryError, ptr, "could not allocate ", rounded, " bytes of pinned host memory");
    p.blocks.emplace(static_cast<const char*>(ptr), rounded);
    p.stats.allocations.increase(1);
    p.stats.allocated_bytes.increase(rounded);
    ++p.stats.num_host_alloc;
  }
  p.stats.active_requests.increase(1);
  p.stats.active_bytes.increase(p.blocks.at(static_cast<const char*>(ptr)));
  return {ptr, ptr, &releasePinned, c10::Device(c10::DeviceType::CPU)};
}

void NeuronHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  nrt::copyBytes(dest, src, count);
}

void NeuronHostAllocator::empty_cache() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto& [size, ptr] : p.free_blocks) {
    p.blocks.erase(static_cast<const char*>(ptr));
    p.stats.allocations.decrease(1);
    p.stats.allocated_bytes.decrease(size);
    ++p.stats.num_host_free;
    std::free(ptr);
  }
  p.free_blocks.clear();
}

at::HostStats NeuronHostAllocator::get_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.stats;
}

void NeuronHostAllocator::reset_accumulated_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto* stat : {&p.stats.active_requests, &p.stats.active_bytes, &p.stats.allocations, &p.stats.allocated_bytes}) {
    stat->reset_accumulated();
  }
  p.stats.num_host_alloc = p.stats.num_host_free = 0;
}

void NeuronHostAllocator::reset_peak_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto* stat : {&p.stats.active_requests, &p.stats.active_bytes, &p.stats.allocations, &p.stats.allocated_bytes}) {
    stat->reset_peak();
  }
}

bool NeuronHostAllocator::isPinned(const void* ptr) const {
  auto& p = pool();
  const auto* address = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.blocks.upper_bound(address);
  if (it == p.blocks.begin()) return false;
  --it;
  return address < it->first + it->second;
}

NeuronHostAllocator& hostAllocator() {
  static NeuronHostAllocator allocator;
  return allocator;
}

REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &hostAllocator());

}  // namespace torch_neuronx
