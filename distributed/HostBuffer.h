// A neuron or CPU tensor seen by the transport as a flat, contiguous CPU tensor.
//
// Neuron device memory is host-addressable (runtime/HostAccess.h), so a
// contiguous neuron tensor is used in place through a zero-copy CPU alias
// (aten/core/HostAlias.h, which refuses memory the CPU cannot address). Only a
// non-contiguous tensor (a transposed view, a chunk of a wider tensor, as
// tensor parallelism passes) goes through a contiguous staging copy, which
// writeBack() returns.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_neuronx::distributed {

class HostBuffer {
 public:
  explicit HostBuffer(const at::Tensor& tensor);

  const at::Tensor& flat() const { return flat_; }
  // Copies a staged result back into the tensor; a no-op for tensors used in place.
  void writeBack() const;

 private:
  at::Tensor alias_;  // the tensor's own memory, as a CPU tensor
  at::Tensor flat_;   // 1-D and contiguous: alias_ itself, or a staging copy
  bool staged_;
};

}  // namespace torch_neuronx::distributed
