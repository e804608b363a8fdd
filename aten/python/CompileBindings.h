#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuronx {

void bindCompile(pybind11::module& m);

}  // namespace torch_neuronx
