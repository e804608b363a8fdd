// The device allocator torch sees for "neuron": a c10::DeviceAllocator over
// the runtime's per-core caching allocator (torch.accelerator.memory_* and
// torch.neuron.memory_* read its stats).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace torch_neuronx {

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Allocates on an explicit core rather than the current one.
  c10::DataPtr allocateOn(c10::DeviceIndex device, size_t nbytes);
  // As allocateOn, but an empty DataPtr when the block does not fit.
  c10::DataPtr tryAllocateOn(c10::DeviceIndex device, size_t nbytes);
};

NeuronAllocator& neuronAllocator();

// A block of the neuron allocator as CPU memory, for CPU kernels that must
// see CPU storages: its data is the block's host view (runtime/HostAccess.h)
// and its core still frees it. relabelAsDevice() turns it back.
c10::DataPtr asHostBlock(c10::DataPtr&& block, size_t nbytes);
// Allocates device memory of `device` as host blocks, for CPU kernels that
// grow an aliased output (see HostAlias.h).
c10::Allocator& aliasGrowthAllocator(c10::DeviceIndex device);
// True for blocks from the neuron allocator, whatever their label.
bool isDeviceAllocation(const c10::DataPtr& ptr);
c10::DataPtr relabelAsDevice(c10::DataPtr&& ptr, c10::DeviceIndex device);
// Where the device sees a block of the neuron allocator, whatever its label.
void* deviceAddress(const c10::DataPtr& block);

// Wraps memory that an ATen CPU kernel allocated as device memory of `device`,
// charging it to that core's stats and capacity (no copy).
c10::DataPtr adoptHostMemory(c10::DataPtr&& host, size_t nbytes, c10::DeviceIndex device);

}  // namespace torch_neuronx
