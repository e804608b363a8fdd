// How the CPU reaches device memory: the one place that knows that the
// emulator's device memory is host memory. Whatever lets a CPU kernel, a
// compiled graph or a collective work on device bytes in place asks here, so
// a runtime whose memory the CPU cannot address (HBM behind a DMA engine)
// plugs in by answering hostAddressable() with false; each caller then says
// clearly what it cannot do, or keeps its CPU buffers in host memory.
#pragma once

#include <cstddef>
#include <stdexcept>

namespace nrt {

class DeviceMemory;

// A host view was asked of bytes that are not device memory of that core.
class NotDeviceMemory : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Whether the CPU can load and store device memory where it lies. True for
// the emulator.
bool hostAddressable();

// The address at which the CPU reads and writes the `bytes` bytes of device
// memory at `device_ptr`, which must lie in a segment of `memory` (live or
// cached) or in memory the core adopted (DeviceMemory::chargeExternal).
// Throws NotDeviceMemory otherwise; an empty range is never checked.
// In the emulator the view is the device address itself. Only for a runtime
// that is hostAddressable().
void* hostView(const DeviceMemory& memory, void* device_ptr, std::size_t bytes);
// As above for the runtime's core `device`; std::out_of_range if there is none.
void* hostView(int device, void* device_ptr, std::size_t bytes);

}  // namespace nrt
