#include "Runtime.h"

#include <stdexcept>
#include <string>

#include "CoreClaim.h"

namespace nrt {

Runtime& Runtime::instance() {
  static Runtime runtime;
  return runtime;
}

Runtime::Runtime() {
  const Topology& topology = Topology::instance();
  if (!topology.valid()) return;
  for (int i = 0; i < topology.coreCount(); ++i) {
    const LogicalCore& core = topology.core(i);
    auto claim = [core] { claimPhysicalCores(core.logical_id, core.chip, core.physical_first, core.physical_count); };
    memories_.push_back(std::make_unique<DeviceMemory>(i, core.hbm_bytes, claim));
  }
}

DeviceMemory& Runtime::memory(int device) {
  if (device < 0 || device >= deviceCount()) {
    throw std::out_of_range("neuron:" + std::to_string(device) + " does not exist: " +
                            std::to_string(deviceCount()) + " NeuronCore(s) are visible");
  }
  return *memories_[device];
}

int Runtime::deviceOfPointer(const void* ptr) const {
  for (const auto& memory : memories_) {
    if (memory->owns(ptr)) return memory->device();
  }
  return -1;
}

}  // namespace nrt
