#include "aten/ops/CpuAlias.h"

#include <c10/core/StorageImpl.h>

#include "aten/core/NeuronAllocator.h"
#include "runtime/Copy.h"

namespace torch_neuronx {
namespace {

void borrowedBytes(void*) {}

}  // namespace

void syncFromAlias(const at::Tensor& alias, const at::Tensor& t) {
  if (!isNeuron(t)) return;
  c10::StorageImpl* alias_storage = alias.storage().unsafeGetStorageImpl();
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (alias_storage->data() != storage->data() || alias_storage->nbytes() != storage->nbytes()) {
    // The kernel resized its output: the new block came from the neuron
    // allocator (see cpuAlias), so it moves over as it is.
    c10::DataPtr grown = alias_storage->set_data_ptr(c10::DataPtr());
    grown = isDeviceAllocation(grown)
                ? relabelAsDevice(std::move(grown), t.device().index())
                : adoptHostMemory(std::move(grown), alias_storage->nbytes(), t.device().index());
    storage->set_data_ptr_noswap(std::move(grown));
    storage->set_nbytes(alias_storage->nbytes());
    // Other views of `t`'s storage in the same call share this alias storage (HostKernelFallback):
    // it borrows the moved bytes again, so that syncing them finds nothing left to move.
    alias_storage->set_data_ptr_noswap(
        c10::DataPtr(storageHostAddress(t), nullptr, &borrowedBytes, c10::Device(c10::DeviceType::CPU)));
  }
  if (t.is_nested()) return;  // its nested sizes are metadata tensors the kernel does not replace
  auto* impl = t.unsafeGetTensorImpl();
  if (impl->sizes() != alias.sizes() || impl->strides() != alias.strides() ||
      impl->storage_offset() != alias.storage_offset()) {
    impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
  // A kernel may leave its output lazily conjugated or negated (linalg_lu_solve.out with left=False
  // sets the conjugate bit on `out`): the bits are part of the value.
  if (t.is_conj() != alias.is_conj()) t._set_conj(alias.is_conj());
  if (t.is_neg() != alias.is_neg()) t._set_neg(alias.is_neg());
}

at::Tensor fromCpuResult(const at::Tensor& result, c10::DeviceIndex device,
                         c10::ArrayRef<std::pair<at::Tensor, at::Tensor>> alias_of_input) {
  if (!result.defined()) return result;
  TORCH_CHECK(result.device().is_cpu(), "internal error: expected a CPU kernel result, got ", result.device());
  if (result.is_nested()) return nestedOver(fromCpuResult(nestedStorage(result), device, alias_of_input), result);
  TORCH_CHECK_NOT_IMPLEMENTED(result.layout() == c10::kStrided,
                              "neuron supports strided (dense) tensors only; the operator would return layout ",
                              result.layout(), ". Keep sparse tensors on the CPU, or call .to_dense() first.");
  TORCH_CHECK_NOT_IMPLEMENTED(!result.is_quantized(), "neuron does not support PyTorch's quantized tensors; the "
                              "operator would return one of ", result.scalar_type(), ". Use int8 or float8 tensors "
                              "with explicit scales, or keep quantized tensors on the CPU.");
  const c10::StorageImpl* result_storage = result.storage().unsafeGetStorageImpl();
  for (const auto& [input, alias] : alias_of_input) {
    if (alias.defined() && alias.storage().unsafeGetStorageImpl() == result_storage) {
      return tensorOver(input.storage(), c10::DispatchKey::PrivateUse1, result);
    }
  }
  const size_t nbytes = result.storage().nbytes();
  c10::DataPtr memory;
  // A result only this call holds is the kernel's new output and its memory moves over; a kernel may also
  // return a tensor that lives on elsewhere (a nested tensor's metadata, a cached constant), whose memory
  // must stay where it is.
  if (result.use_count() == 1 && result.storage().use_count() == 1 && result.storage().resizable() && nbytes > 0) {
    c10::DataPtr host = result.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr());
    memory = isDeviceAllocation(host) ? relabelAsDevice(std::move(host), device)
                                      : adoptHostMemory(std::move(host), nbytes, device);
  } else {
    // Shared (a kernel kept a reference) or not ours to take: copy it.
    memory = neuronAllocator().allocateOn(device, nbytes);
    nrt::copyBytes(memory.get(), result.storage().data(), nbytes);
  }
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes, std::move(memory),
                                                       &neuronAllocator(), /*resizable=*/true);
  return tensorOver(c10::Storage(std::move(storage)), c10::DispatchKey::PrivateUse1, result);
}

bool sharesMemory(const at::Tensor& out, std::initializer_list<at::Tensor> inputs) {
  if (!out.has_storage() || out.storage().nbytes() == 0) return false;
  const auto* begin = static_cast<const char*>(out.storage().data());
  const auto* end = begin + out.storage().nbytes();
  for (const at::Tensor& input : inputs) {
    if (!input.defined() || !input.has_storage()) continue;
    const auto* first = static_cast<const char*>(input.storage().data());
    const auto* last = first + input.storage().nbytes();
    if (first < end && begin < last) return true;
  }
  return false;
}

}  // namespace torch_neuronx
