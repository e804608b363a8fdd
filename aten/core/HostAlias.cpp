#include "aten/core/HostAlias.h"

#include <ATen/NestedTensorImpl.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <stdexcept>

#include "aten/core/NeuronAllocator.h"
#include "runtime/HostAccess.h"

namespace torch_neuronx {
namespace {

void noDelete(void*) {}

}  // namespace

bool isNeuron(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

void requireHostAddressable(const char* work) {
  TORCH_CHECK(nrt::hostAddressable(), work, " needs the CPU to load and store neuron device memory in place, ",
              "but this runtime's device memory is not host-addressable");
}

void* storageHostAddress(const at::Tensor& t, AliasUse use) {
  requireHostAddressable("a CPU view of a neuron tensor");
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const c10::DeviceIndex device = t.device().index();
  // mutable_data() gives a copy-on-write storage bytes of its own; data() leaves them shared.
  void* bytes = use == AliasUse::kWrite ? storage->mutable_data() : const_cast<void*>(storage->data());
  try {
    return nrt::hostView(device, bytes, storage->nbytes());
  } catch (const nrt::NotDeviceMemory& e) {
    TORCH_CHECK(false, "a tensor on neuron:", static_cast<int>(device), " has no CPU view: ", e.what());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  }
}

at::Tensor tensorOver(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto tensor =
      at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) tensor._set_conj(true);
  if (like.is_neg()) tensor._set_neg(true);
  return tensor;
}

at::Tensor nestedStorage(const at::Tensor& nested) {
  return at::native::get_nested_tensor_impl(nested)->get_unsafe_storage_as_tensor();
}

at::Tensor nestedOver(const at::Tensor& storage, const at::Tensor& like) {
  const auto* impl = at::native::get_nested_tensor_impl(like);
  return at::detail::make_tensor<at::native::NestedTensorImpl>(storage, impl->get_nested_sizes(),
                                                               impl->get_nested_strides(),
                                                               impl->get_storage_offsets());
}

at::Tensor cpuAlias(const at::Tensor& t, AliasUse use) {
  if (!isNeuron(t)) return t;
  if (t.is_nested()) return nestedOver(cpuAlias(nestedStorage(t), use), t);
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  // Borrowed: the neuron tensor keeps the memory alive while the kernel runs.
  c10::DataPtr borrowed(storageHostAddress(t, use), nullptr, &noDelete, c10::Device(c10::DeviceType::CPU));
  c10::Allocator* growth = &aliasGrowthAllocator(t.device().index());
  auto alias_storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage->nbytes(),
                                                             std::move(borrowed), growth,
                                                             /*resizable=*/storage->resizable());
  return tensorOver(c10::Storage(std::move(alias_storage)), c10::DispatchKey::CPU, t);
}

std::optional<at::Tensor> aliasBeside(const at::Tensor& t, const at::Tensor& other, const at::Tensor& other_alias) {
  if (t.unsafeGetTensorImpl() == other.unsafeGetTensorImpl()) return other_alias;
  if (!isNeuron(t) || t.is_nested() || other.is_nested() ||
      t.storage().unsafeGetStorageImpl() != other.storage().unsafeGetStorageImpl()) {
    return std::nullopt;
  }
  return tensorOver(other_alias.storage(), c10::DispatchKey::CPU, t);
}

}  // namespace torch_neuronx
