#include "aten/core/NeuronHooks.h"

#include <c10/core/StorageImpl.h>

#include "aten/core/NeuronAllocator.h"
#include "aten/core/NeuronGenerator.h"
#include "aten/core/NeuronGuard.h"
#include "aten/core/NeuronHostAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuronx {

bool NeuronHooks::isAvailable() const { return deviceCount() > 0; }

void NeuronHooks::init() const {
  const auto& topology = nrt::Topology::instance();
  TORCH_CHECK(topology.valid(), "cannot initialise the neuron device: ", topology.error());
  TORCH_CHECK(topology.coreCount() > 0, "cannot initialise the neuron device: no NeuronCore is visible");
}

bool NeuronHooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return device_index >= 0 && device_index < visibleCoreCount();
}

c10::DeviceIndex NeuronHooks::deviceCount() const { return torch_neuronx::deviceCount(); }

void NeuronHooks::setCurrentDevice(c10::DeviceIndex device) const { torch_neuronx::setCurrentDevice(device); }

c10::DeviceIndex NeuronHooks::getCurrentDevice() const { return currentDevice(); }

c10::DeviceIndex NeuronHooks::exchangeDevice(c10::DeviceIndex device) const {
  const auto previous = currentDevice();
  if (device >= 0 && device != previous) torch_neuronx::setCurrentDevice(device);
  return previous;
}

c10::DeviceIndex NeuronHooks::maybeExchangeDevice(c10::DeviceIndex device) const { return exchangeDevice(device); }

const at::Generator& NeuronHooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return defaultGenerator(device_index);
}

at::Generator NeuronHooks::getNewGenerator(c10::DeviceIndex device_index) const { return newGenerator(device_index); }

at::Device NeuronHooks::getDeviceFromPtr(void* data) const {
  const int device = nrt::Runtime::instance().deviceOfPointer(data);
  TORCH_CHECK(device >= 0, "the pointer ", data, " is not neuron device memory");
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)};
}

bool NeuronHooks::isPinnedPtr(const void* data) const { return hostAllocator().isPinned(data); }

c10::Allocator* NeuronHooks::getPinnedMemoryAllocator() const { return &hostAllocator(); }

void NeuronHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  auto* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  const auto device = impl->device().index();
  c10::DataPtr fresh = neuronAllocator().allocateOn(device, newsize);
  const size_t keep = std::min(newsize, impl->nbytes());
  if (keep > 0) nrt::copyBytes(fresh.get(), impl->data(), keep);
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(newsize);
}

namespace {
struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
};
RegisterHooks register_hooks;
}  // namespace

}  // namespace torch_neuronx
