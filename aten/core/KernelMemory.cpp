#include "aten/core/KernelMemory.h"

#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/graph_task.h>

#include "aten/core/NeuronAllocator.h"
#include "runtime/BlockOwners.h"
#include "runtime/Copy.h"
#include "runtime/HostAccess.h"
#include "runtime/Runtime.h"

namespace torch_neuronx {
namespace {

thread_local c10::DeviceIndex tls_kernel_device = -1;
c10::Allocator* host_allocator = nullptr;  // torch's CPU allocator

// The backward scope of this thread: its autograd graph task, and the device
// that was current before it (kNoTask: none).
constexpr int kNoTask = -2;
thread_local int tls_backward_task = kNoTask;
thread_local c10::DeviceIndex tls_backward_previous = -1;

void endBackwardScope() {
  tls_kernel_device = tls_backward_previous;
  tls_backward_task = kNoTask;
}

// The device whose memory a CPU kernel's allocation comes from, or -1.
c10::DeviceIndex kernelDevice() {
  if (tls_backward_task != kNoTask && torch::autograd::get_current_graph_task_id() != tls_backward_task) {
    endBackwardScope();  // that backward raised past its post-hook
  }
  return tls_kernel_device;
}

// raw_allocate()/raw_deallocate() users get one deleter for every block, so
// it must tell device blocks from host ones. raw_allocate() hands out a
// block's host view and insists it equals the context, so `ptr` is the
// device block too.
void freeAnyBlock(void* ptr) {
  if (!ptr) return;
  const int device = nrt::blockOwner(ptr);
  if (device < 0) return host_allocator->raw_deallocate(ptr);
  // A device segment that is not live is a double free: never hand it to the host.
  nrt::Runtime::instance().memory(device).freeIfOwned(ptr);
}

class ScopeAwareCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    // A CPU kernel computes on its buffers, so they can be device memory only
    // where the CPU addresses it; elsewhere they stay in host memory.
    const c10::DeviceIndex device = nbytes == 0 || !nrt::hostAddressable() ? -1 : kernelDevice();
    if (device < 0) return host_allocator->allocate(nbytes);
    c10::DataPtr block = neuronAllocator().tryAllocateOn(device, nbytes);
    // A block that does not fit (a large temporary of the CPU kernel) comes
    // from the host: outputs among such blocks are charged to the core when
    // they are adopted (ops/CpuAlias.cpp), which raises OutOfMemoryError then.
    if (!block) return host_allocator->allocate(nbytes);
    return asHostBlock(std::move(block), nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &freeAnyBlock; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    nrt::copyBytes(dest, src, count);
  }
};

}  // namespace

// kernelDevice() first ends a backward scope left by an exception, so that
// this scope never restores it.
KernelMemoryScope::KernelMemoryScope(c10::DeviceIndex device) : previous_(kernelDevice()) {
  tls_kernel_device = device;
  // Every kernel on a core runs inside a scope: count it as submitted work.
  nrt::Streams::instance().noteSubmitted(device);
}

KernelMemoryScope::~KernelMemoryScope() { tls_kernel_device = previous_; }

void enterBackwardScope(c10::DeviceIndex device) {
  if (tls_backward_task != kNoTask) endBackwardScope();
  tls_backward_previous = tls_kernel_device;
  tls_backward_task = torch::autograd::get_current_graph_task_id();
  tls_kernel_device = device;
  nrt::Streams::instance().noteSubmitted(device);
}

void leaveBackwardScope() {
  if (tls_backward_task != kNoTask) endBackwardScope();
}

bool inKernelMemoryScope() { return kernelDevice() >= 0; }

void installKernelMemory() {
  static ScopeAwareCpuAllocator allocator;
  if (host_allocator) return;
  host_allocator = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

}  // namespace torch_neuronx
