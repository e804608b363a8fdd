#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {

// torch_neuronx._C._nki_*: builds, verifies and runs the programs that
// torch_neuronx/nki traces (nki_runtime/), on neuron or CPU tensors.
void bindNki(pybind11::module& m);

}  // namespace torch_neuronx
