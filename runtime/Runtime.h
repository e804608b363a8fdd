// The emulated Neuron runtime, as seen by the plugin: one DeviceMemory per
// visible logical core, the topology, streams/events and the DMA copy.
// Nothing here includes torch: a hardware runtime could implement this API.
#pragma once

#include <memory>
#include <vector>

#include "Copy.h"
#include "DeviceMemory.h"
#include "Stream.h"
#include "Topology.h"

namespace nrt {

class Runtime {
 public:
  static Runtime& instance();
  int deviceCount() const { return static_cast<int>(memories_.size()); }
  // Throws std::out_of_range naming the index and the count.
  DeviceMemory& memory(int device);
  // Which device owns ptr (a live or cached block), or -1.
  int deviceOfPointer(const void* ptr) const;

 private:
  Runtime();
  std::vector<std::unique_ptr<DeviceMemory>> memories_;
};

}  // namespace nrt
