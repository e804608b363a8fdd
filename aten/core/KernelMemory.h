// Memory that ATen's CPU kernels allocate while they compute for neuron.
//
// A CPU kernel running on device memory (ops/CpuAlias.h) allocates its
// outputs and temporaries through the CPU allocator. Inside a
// KernelMemoryScope those allocations come from the scope's NeuronCore
// instead, through its caching allocator: outputs are device memory from the
// start (true stats and capacity, no copy), and blocks are reused rather than
// freshly page-faulted on every op. Outside a scope nothing changes.
#pragma once

#include <c10/core/Device.h>

namespace torch_neuronx {

class KernelMemoryScope {
 public:
  explicit KernelMemoryScope(c10::DeviceIndex device);
  ~KernelMemoryScope();
  KernelMemoryScope(const KernelMemoryScope&) = delete;
  KernelMemoryScope& operator=(const KernelMemoryScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// Installs the scope-aware CPU allocator (once; torch's own stays underneath).
void installKernelMemory();

}  // namespace torch_neuronx
