// Pinned host memory for "neuron": Tensor.pin_memory(), the DataLoader and
// the DDP reducer need it. Blocks are cached by size and recognised by
// isPinned(), which backs Tensor.is_pinned().
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torch_neuronx {

class NeuronHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override { return true; }
  void empty_cache() override;
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;

  bool isPinned(const void* ptr) const;
};

NeuronHostAllocator& hostAllocator();

}  // namespace torch_neuronx
