#include "aten/core/KernelMemory.h"

#include <c10/core/CPUAllocator.h>

#include "aten/core/NeuronAllocator.h"
#include "runtime/BlockOwners.h"
#include "runtime/Copy.h"
#include "runtime/HostAccess.h"
#include "runtime/Runtime.h"

namespace torch_neuronx {
namespace {

thread_local c10::DeviceIndex tls_kernel_device = -1;
c10::Allocator* host_allocator = nullptr;  // torch's CPU allocator

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
    if (tls_kernel_device < 0 || nbytes == 0 || !nrt::hostAddressable()) return host_allocator->allocate(nbytes);
    c10::DataPtr block = neuronAllocator().tryAllocateOn(tls_kernel_device, nbytes);
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

KernelMemoryScope::KernelMemoryScope(c10::DeviceIndex device) : previous_(tls_kernel_device) {
  tls_kernel_device = device;
  // Every kernel on a core runs inside a scope: count it as submitted work.
  nrt::Streams::instance().noteSubmitted(device);
}

KernelMemoryScope::~KernelMemoryScope() { tls_kernel_device = previous_; }

void installKernelMemory() {
  static ScopeAwareCpuAllocator allocator;
  if (host_allocator) return;
  host_allocator = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

}  // namespace torch_neuronx
