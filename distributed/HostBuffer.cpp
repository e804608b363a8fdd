#include "distributed/HostBuffer.h"

#include <ATen/ATen.h>

#include "aten/core/HostAlias.h"

namespace torch_neuronx::distributed {

HostBuffer::HostBuffer(const at::Tensor& tensor)
    : alias_(cpuAlias(tensor)), staged_(!tensor.is_contiguous()) {
  TORCH_CHECK(alias_.device().is_cpu(), "the neuron process group handles neuron and CPU tensors, got a tensor on ",
              tensor.device());
  TORCH_CHECK(!tensor.is_sparse(), "the neuron process group does not handle sparse tensors");
  flat_ = staged_ ? alias_.contiguous().reshape({-1}) : alias_.reshape({-1});
}

void HostBuffer::writeBack() const {
  if (staged_) alias_.copy_(flat_.view(alias_.sizes()));
}

}  // namespace torch_neuronx::distributed
