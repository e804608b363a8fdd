// The boundary between a compiled graph and the device: graphs compiled by
// the neuron torch.compile backend (torch_neuronx/compile) are lowered with
// Inductor's CPU code generation and run directly on device memory, which is
// host-addressable. Their inputs cross as zero-copy CPU views, their results
// come back as zero-copy neuron tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_neuronx {

// CPU views of `inputs` over the same bytes (non-neuron tensors pass through).
// Inputs that share a storage get views of one shared CPU storage, so the
// compiled graph sees the same aliasing as the caller.
std::vector<at::Tensor> hostViews(const std::vector<at::Tensor>& inputs);

// Neuron tensors on `device` for a compiled graph's CPU `results`. A result
// over the storage of one of `host_inputs` becomes a view of the matching
// entry of `inputs`; every other result shares its bytes (no copy) and keeps
// them alive. Memory the graph allocated outside the core is charged to it.
std::vector<at::Tensor> deviceResults(const std::vector<at::Tensor>& results, c10::DeviceIndex device,
                                      const std::vector<at::Tensor>& inputs,
                                      const std::vector<at::Tensor>& host_inputs);

}  // namespace torch_neuronx
