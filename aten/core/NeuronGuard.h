// DeviceGuardImpl for "neuron": the thread-local current core and current
// stream per core, and streams/events backed by the runtime.
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_neuronx {

// Visible NeuronCores (up to nrt::kMaxLogicalCores).
int visibleCoreCount() noexcept;
// The same count in PyTorch's int8_t device numbering, which tops out at 127:
// with 128 visible cores the last one is addressable (neuron:127) but the
// count is not representable (docs/topology.md).
c10::DeviceIndex deviceCount() noexcept;
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex device);
// Throws IndexError naming the index and how many cores are visible.
// Takes an int so that an index is checked before it is narrowed to int8_t.
void checkDeviceIndex(int device);

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device device) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device device) const override;
  void uncheckedSetDevice(c10::Device device) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;

  c10::Stream getStream(c10::Device device) const override;
  c10::Stream getDefaultStream(c10::Device device) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority = false) const override;
  c10::Stream getNewStream(c10::Device device, int priority = 0) const override;
  c10::Stream exchangeStream(c10::Stream stream) const override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;

  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override;
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override;
};

}  // namespace torch_neuronx
