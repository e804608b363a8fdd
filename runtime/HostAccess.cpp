#include "HostAccess.h"

#include <sstream>

#include "BlockOwners.h"
#include "DeviceMemory.h"
#include "Runtime.h"

namespace nrt {
namespace {

[[noreturn]] void refuse(const DeviceMemory& memory, const void* ptr, std::size_t bytes) {
  std::ostringstream message;
  message << "the " << bytes << " bytes at " << ptr << " are not device memory of NeuronCore " << memory.device()
          << ": they lie in none of its blocks nor in memory it adopted, so the host has no view of them";
  throw NotDeviceMemory(message.str());
}

}  // namespace

bool hostAddressable() { return true; }

void* hostView(const DeviceMemory& memory, void* device_ptr, std::size_t bytes) {
  if (bytes == 0) return device_ptr;
  // A storage's bytes start at a segment base nearly always: one shard lookup,
  // no core lock, on the path of every op that aliases device memory.
  const OwnedSegment segment = segmentAt(device_ptr);
  if (segment.device == memory.device() && bytes <= segment.bytes) return device_ptr;
  // Adopted memory and views into a block (from_blob) are rare: the core's own
  // records, under its lock, and never every core's.
  if (memory.holdsExternal(device_ptr, bytes) || memory.owns(device_ptr, bytes)) return device_ptr;
  refuse(memory, device_ptr, bytes);
}

void* hostView(int device, void* device_ptr, std::size_t bytes) {
  return hostView(Runtime::instance().memory(device), device_ptr, bytes);
}

}  // namespace nrt
