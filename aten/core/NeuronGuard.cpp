#include "aten/core/NeuronGuard.h"

#include <algorithm>
#include <array>
#include <limits>

#include <c10/util/Exception.h>

#include "runtime/Runtime.h"

namespace torch_neuronx {
namespace {

thread_local c10::DeviceIndex tls_device = 0;
// Current stream id per core, per thread (0 = the core's default stream).
thread_local std::array<nrt::StreamId, nrt::kMaxLogicalCores> tls_streams{};

c10::DeviceIndex resolve(c10::DeviceIndex index) { return index < 0 ? currentDevice() : index; }

// The index of a core whose per-thread state is read or written.
c10::DeviceIndex checked(c10::DeviceIndex index) {
  const auto device = resolve(index);
  checkDeviceIndex(device);
  return device;
}

nrt::Event* asEvent(void* event) { return static_cast<nrt::Event*>(event); }

}  // namespace

int visibleCoreCount() noexcept {
  try {
    return nrt::Runtime::instance().deviceCount();
  } catch (...) {
    return 0;
  }
}

c10::DeviceIndex deviceCount() noexcept {
  constexpr int kLargest = std::numeric_limits<c10::DeviceIndex>::max();
  return static_cast<c10::DeviceIndex>(std::min(visibleCoreCount(), kLargest));
}

void checkDeviceIndex(int device) {
  const auto& topology = nrt::Topology::instance();
  TORCH_CHECK(topology.valid(), "the NeuronCore topology is invalid: ", topology.error());
  const int count = visibleCoreCount();
  TORCH_CHECK_INDEX(device >= 0 && device < count, "neuron:", device,
                    " is not a valid device: ", count, " NeuronCore(s) are visible (valid indices 0..", count - 1,
                    ")");
}

c10::DeviceIndex currentDevice() { return tls_device; }

void setCurrentDevice(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  tls_device = device;
}

c10::Device NeuronGuardImpl::exchangeDevice(c10::Device device) const {
  const auto previous = getDevice();
  if (device.index() != previous.index()) setDevice(device);
  return previous;
}

c10::Device NeuronGuardImpl::getDevice() const { return {kType, currentDevice()}; }

void NeuronGuardImpl::setDevice(c10::Device device) const {
  TORCH_CHECK(device.type() == kType, "expected a neuron device, got ", device);
  setCurrentDevice(resolve(device.index()));
}

void NeuronGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  if (device.index() >= 0 && device.index() < visibleCoreCount()) tls_device = device.index();
}

c10::DeviceIndex NeuronGuardImpl::deviceCount() const noexcept { return torch_neuronx::deviceCount(); }

c10::Stream NeuronGuardImpl::getStream(c10::Device device) const {
  const auto index = checked(device.index());
  return c10::Stream(c10::Stream::UNSAFE, {kType, index}, tls_streams[index]);
}

c10::Stream NeuronGuardImpl::getDefaultStream(c10::Device device) const {
  return c10::Stream(c10::Stream::DEFAULT, {kType, checked(device.index())});
}

c10::Stream NeuronGuardImpl::getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const {
  return getNewStream(device, isHighPriority ? -1 : 0);
}

c10::Stream NeuronGuardImpl::getNewStream(c10::Device device, int priority) const {
  const auto index = checked(device.index());
  const auto id = nrt::Streams::instance().newStream(index, priority);
  return c10::Stream(c10::Stream::UNSAFE, {kType, index}, id);
}

c10::Stream NeuronGuardImpl::exchangeStream(c10::Stream stream) const {
  const auto index = checked(stream.device_index());
  const auto previous = c10::Stream(c10::Stream::UNSAFE, {kType, index}, tls_streams[index]);
  tls_streams[index] = stream.id();
  return previous;
}

bool NeuronGuardImpl::queryStream(const c10::Stream& stream) const {
  checkDeviceIndex(stream.device_index());
  return nrt::Streams::instance().query(stream.device_index(), stream.id());
}

void NeuronGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  checkDeviceIndex(stream.device_index());
  nrt::Streams::instance().synchronize(stream.device_index(), stream.id());
}

void NeuronGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  nrt::Streams::instance().synchronizeDevice(checked(device_index));
}

void NeuronGuardImpl::destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept {
  delete asEvent(event);
}

void NeuronGuardImpl::record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
                             const c10::EventFlag flag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event on neuron:",
              static_cast<int>(device_index), " cannot be recorded on a stream of neuron:",
              static_cast<int>(stream.device_index()));
  if (!*event) *event = new nrt::Event(flag == c10::EventFlag::BACKEND_DEFAULT);
  asEvent(*event)->record(stream.device_index(), stream.id());
}

void NeuronGuardImpl::block(void* event, const c10::Stream& /*stream*/) const {
  // An unrecorded event is already complete; a recorded one completed when
  // its stream's work ran (inline), so the waiting stream may proceed.
  if (event) asEvent(event)->synchronize();
}

bool NeuronGuardImpl::queryEvent(void* event) const { return !event || asEvent(event)->query(); }

void NeuronGuardImpl::synchronizeEvent(void* event) const {
  if (event) asEvent(event)->synchronize();
}

double NeuronGuardImpl::elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const {
  TORCH_CHECK(start && end, "elapsed_time needs both events to be recorded first");
  try {
    return asEvent(start)->elapsedMs(*asEvent(end));
  } catch (const std::logic_error& e) {
    TORCH_CHECK(false, e.what());
  }
}

c10::DeviceCapability NeuronGuardImpl::getDeviceCapability(c10::Device /*device*/) const {
  c10::DeviceCapability capability;
  // Every dtype computes on the device (float64/complex are counted as CPU
  // fallbacks, but they do run), so all are reported as supported.
  return capability;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace torch_neuronx
