#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {

// Adds torch_neuronx._C._NeuronBackend (a torch.distributed Backend) when
// torch is built with distributed support; does nothing otherwise.
void bindDistributed(pybind11::module& m);

}  // namespace torch_neuronx
