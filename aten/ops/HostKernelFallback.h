// The boxed fallback that runs ATen's CPU kernels on device memory.
#pragma once

namespace torch_neuronx {

// Structured ops (add, sum, relu, ...) reach a backend through a generic
// kernel that computes the output's shape, allocates it and calls the .out
// variant. For ops with no neuron kernel of their own this routes the
// functional and in-place variants straight to the CPU kernel instead, which
// computes the shape once. Call once, after all static registrations.
void routeStructuredOpsToHostKernels();

}  // namespace torch_neuronx
