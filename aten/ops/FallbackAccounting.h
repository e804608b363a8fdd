// What a real NeuronCore could not run. Ops on dtypes the hardware lacks
// (float64, complex) still run here, but each is counted and warned about
// once, as TorchNeuron does for its CPU fallbacks; with
// TORCH_NEURONX_DISABLE_CPU_FALLBACK=1 they raise instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch_neuronx {

bool lacksHardwareSupport(c10::ScalarType dtype);

// Counts `op` (for `dtype`) as a CPU fallback; raises if fallbacks are disabled.
void noteCpuFallback(const std::string& op, c10::ScalarType dtype);

// op name -> count, e.g. {"aten::add.out (Double)": 3}.
std::map<std::string, int64_t> cpuFallbackCounts();
void resetCpuFallbackCounts();

}  // namespace torch_neuronx
