#include "aten/core/NeuronAllocator.h"

#include <algorithm>
#include <array>
#include <utility>

#include <c10/core/impl/GPUTrace.h>
#include <c10/util/Exception.h>

#include "aten/core/HostAlias.h"
#include "aten/core/NeuronGuard.h"
#include "runtime/HostAccess.h"
#include "runtime/Runtime.h"

namespace torch_neuronx {
namespace {

// One deleter per core, so that the DataPtr needs no context object.
template <int Device>
void freeOn(void* ptr) {
  nrt::Runtime::instance().memory(Device).free(ptr);
}

template <int... Devices>
constexpr std::array<c10::DeleterFnPtr, sizeof...(Devices)> makeDeleters(std::integer_sequence<int, Devices...>) {
  return {&freeOn<Devices>...};
}

constexpr auto kDeleters = makeDeleters(std::make_integer_sequence<int, nrt::kMaxLogicalCores>{});

nrt::DeviceMemory& memoryOf(c10::DeviceIndex device) {
  try {
    return nrt::Runtime::instance().memory(device);
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  }
}

void toTorchStat(const nrt::Stat& from, c10::CachingDeviceAllocator::StatArray& to) {
  for (auto& stat : to) {
    stat.current = from.current;
    stat.peak = from.peak;
    stat.allocated = from.allocated;
    stat.freed = from.freed;
  }
}

struct AdoptedMemory {
  c10::DataPtr host;
  size_t nbytes;
  c10::DeviceIndex device;
};

void releaseAdopted(void* context) {
  auto* adopted = static_cast<AdoptedMemory*>(context);
  nrt::Runtime::instance().memory(adopted->device).releaseExternal(adopted->host.get(), adopted->nbytes);
  delete adopted;
}

}  // namespace

c10::DataPtr NeuronAllocator::allocateOn(c10::DeviceIndex device, size_t nbytes) {
  void* ptr = nullptr;
  try {
    ptr = memoryOf(device).allocate(nbytes);
  } catch (const nrt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  }
  return {ptr, ptr, kDeleters[device], c10::Device(c10::DeviceType::PrivateUse1, device)};
}

c10::DataPtr NeuronAllocator::tryAllocateOn(c10::DeviceIndex device, size_t nbytes) {
  void* ptr = memoryOf(device).tryAllocate(nbytes);
  if (!ptr) return {};
  return {ptr, ptr, kDeleters[device], c10::Device(c10::DeviceType::PrivateUse1, device)};
}

c10::DataPtr NeuronAllocator::allocate(size_t nbytes) {
  return allocateOn(currentDevice(), nbytes);
}

void NeuronAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  nrt::copyBytes(dest, src, count);
}

void NeuronAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  auto& runtime = nrt::Runtime::instance();
  for (int device = 0; device < runtime.deviceCount(); ++device) runtime.memory(device).emptyCache();
}

void NeuronAllocator::recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) {
  // Work executes at submission, so a block is never in use by a stream once
  // it is freed; an asynchronous runtime would defer reuse here.
}

c10::CachingDeviceAllocator::DeviceStats NeuronAllocator::getDeviceStats(c10::DeviceIndex device) {
  const nrt::MemoryStats stats = memoryOf(device).stats();
  c10::CachingDeviceAllocator::DeviceStats out;
  toTorchStat(stats.allocation, out.allocation);
  toTorchStat(stats.segment, out.segment);
  toTorchStat(stats.active, out.active);
  toTorchStat(stats.allocated_bytes, out.allocated_bytes);
  toTorchStat(stats.reserved_bytes, out.reserved_bytes);
  toTorchStat(stats.active_bytes, out.active_bytes);
  toTorchStat(stats.inactive_split_bytes, out.inactive_split_bytes);
  toTorchStat(stats.requested_bytes, out.requested_bytes);
  out.num_alloc_retries = stats.num_alloc_retries;
  out.num_ooms = stats.num_ooms;
  out.num_device_alloc = stats.num_device_alloc;
  out.num_device_free = stats.num_device_free;
  return out;
}

void NeuronAllocator::resetAccumulatedStats(c10::DeviceIndex device) { memoryOf(device).resetAccumulatedStats(); }

void NeuronAllocator::resetPeakStats(c10::DeviceIndex device) { memoryOf(device).resetPeakStats(); }

std::pair<size_t, size_t> NeuronAllocator::getMemoryInfo(c10::DeviceIndex device) {
  auto& memory = memoryOf(device);
  return {memory.freeBytes(), memory.capacity()};
}

NeuronAllocator& neuronAllocator() {
  static NeuronAllocator allocator;
  return allocator;
}

namespace {
class AliasGrowthAllocator final : public c10::Allocator {
 public:
  c10::DeviceIndex device = 0;
  c10::DataPtr allocate(size_t nbytes) override {
    return asHostBlock(neuronAllocator().allocateOn(device, nbytes), nbytes);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    nrt::copyBytes(dest, src, count);
  }
};
}  // namespace

c10::DataPtr asHostBlock(c10::DataPtr&& block, size_t nbytes) {
  requireHostAddressable("a CPU kernel's buffer in neuron device memory");
  const c10::DeviceIndex device = block.device().index();
  void* view = nrt::hostView(device, block.get(), nbytes);
  const c10::DeleterFnPtr deleter = block.get_deleter();
  // The context stays the device block: it is what the core frees.
  void* context = block.release_context();
  return {view, context, deleter, c10::Device(c10::DeviceType::CPU)};
}

c10::Allocator& aliasGrowthAllocator(c10::DeviceIndex device) {
  static std::array<AliasGrowthAllocator, nrt::kMaxLogicalCores> allocators = [] {
    std::array<AliasGrowthAllocator, nrt::kMaxLogicalCores> all;
    for (int i = 0; i < nrt::kMaxLogicalCores; ++i) all[i].device = static_cast<c10::DeviceIndex>(i);
    return all;
  }();
  return allocators.at(device);
}

bool isDeviceAllocation(const c10::DataPtr& ptr) {
  return std::find(kDeleters.begin(), kDeleters.end(), ptr.get_deleter()) != kDeleters.end();
}

c10::DataPtr relabelAsDevice(c10::DataPtr&& ptr, c10::DeviceIndex device) {
  void* block = deviceAddress(ptr);
  const c10::DeleterFnPtr deleter = ptr.get_deleter();
  ptr.release_context();  // the block moves to the result
  return {block, block, deleter, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

void* deviceAddress(const c10::DataPtr& block) {
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(isDeviceAllocation(block), "not a block of the neuron allocator");
  // allocateOn makes the block its own context; asHostBlock keeps it there.
  return block.get_context();
}

c10::DataPtr adoptHostMemory(c10::DataPtr&& host, size_t nbytes, c10::DeviceIndex device) {
  // The emulated core takes host memory as its own where it lies, which is
  // only sound while the CPU addresses device memory directly.
  requireHostAddressable("adopting a CPU kernel's output as neuron device memory");
  try {
    memoryOf(device).chargeExternal(host.get(), nbytes);
  } catch (const nrt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  }
  void* data = host.get();
  auto* adopted = new AdoptedMemory{std::move(host), nbytes, device};
  return {data, adopted, &releaseAdopted, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &neuronAllocator());

}  // namespace torch_neuronx
