// Zero-copy bridges between neuron tensors and ATen's CPU kernels.
//
// A CPU kernel computes directly on device memory through CPU aliases
// (cpuAlias(), aten/core/HostAlias.h), and its results come back as neuron
// tensors without copying: outputs it wrote in place are already there, fresh
// outputs are adopted as device memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "aten/core/HostAlias.h"

namespace torch_neuronx {

// After a CPU kernel wrote into `alias` (an out= or in-place argument), makes
// `t` show what the kernel did: new memory, sizes, strides and offset.
void syncFromAlias(const at::Tensor& alias, const at::Tensor& t);

// A neuron tensor on `device` for a CPU kernel's result. A result that is a
// view of one of `inputs`' aliases becomes the same view of that input;
// anything else is adopted as device memory, charged to the core.
at::Tensor fromCpuResult(const at::Tensor& result, c10::DeviceIndex device,
                         c10::ArrayRef<std::pair<at::Tensor, at::Tensor>> alias_of_input = {});

// True when `out` and one of `inputs` (undefined ones skipped) lie in the same
// bytes of memory, judged by their storages' extents: a kernel that writes
// `out` while it still reads that input would read its own results.
bool sharesMemory(const at::Tensor& out, std::initializer_list<at::Tensor> inputs);

}  // namespace torch_neuronx
