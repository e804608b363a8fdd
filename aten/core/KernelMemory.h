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

// The compiled backward's kernel memory. Autograd calls a compiled graph's
// backward between two hooks of its node (torch_neuronx/compile/host_graph.py),
// so no C++ scope can enclose it: the pre-hook enters and the post-hook
// leaves. When the backward raises, the engine skips the post-hook; the
// scope then ends by itself as soon as this thread allocates outside that
// autograd graph task, so CPU allocations of later code are never captured.
void enterBackwardScope(c10::DeviceIndex device);
void leaveBackwardScope();
// Whether a kernel-memory scope is active on this thread (for tests).
bool inKernelMemoryScope();

// Installs the scope-aware CPU allocator (once; torch's own stays underneath).
void installKernelMemory();

}  // namespace torch_neuronx
