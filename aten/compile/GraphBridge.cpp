#include "aten/compile/GraphBridge.h"

#include <c10/core/StorageImpl.h>

#include <unordered_map>

#include "aten/core/HostAlias.h"
#include "aten/core/NeuronAllocator.h"

namespace torch_neuronx {
namespace {

void releaseSharedStorage(void* keeper) { delete static_cast<c10::Storage*>(keeper); }

// Device memory that shares (and keeps alive) the bytes of a CPU storage.
c10::Storage shareAsDevice(const c10::Storage& host, c10::DeviceIndex device) {
  const size_t nbytes = host.nbytes();
  const bool on_core = isDeviceAllocation(host.data_ptr());
  // The graph saw a block of the core's allocator through the block's host
  // view; the device addresses the block itself. Other memory is adopted
  // where it lies.
  void* bytes = on_core ? deviceAddress(host.data_ptr()) : host.unsafeGetStorageImpl()->mutable_data();
  c10::DataPtr shared(bytes, new c10::Storage(host), &releaseSharedStorage,
                      c10::Device(c10::DeviceType::PrivateUse1, device));
  // Blocks from the core's allocator are already charged to it; the rest
  // (temporaries too large for the core, or a backward pass) are charged now.
  if (!on_core && nbytes > 0) shared = adoptHostMemory(std::move(shared), nbytes, device);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                            std::move(shared), &neuronAllocator(),
                                                            /*resizable=*/false));
}

// A CPU storage over the bytes of a neuron storage that keeps it alive: the
// compiled graph may save its inputs for the backward pass, after the caller
// dropped them.
c10::Storage shareAsHost(const at::Tensor& input) {
  const c10::Storage& device = input.storage();
  c10::DataPtr shared(storageHostAddress(input), new c10::Storage(device), &releaseSharedStorage,
                      c10::Device(c10::DeviceType::CPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), device.nbytes(),
                                                            std::move(shared), nullptr, /*resizable=*/false));
}

}  // namespace

std::vector<at::Tensor> hostViews(const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> views;
  views.reserve(inputs.size());
  std::unordered_map<const c10::StorageImpl*, c10::Storage> alias_of_storage;
  for (const auto& input : inputs) {
    if (!isNeuron(input)) {
      views.push_back(input);
      continue;
    }
    const c10::StorageImpl* storage = input.storage().unsafeGetStorageImpl();
    auto found = alias_of_storage.find(storage);
    if (found == alias_of_storage.end()) found = alias_of_storage.emplace(storage, shareAsHost(input)).first;
    views.push_back(tensorOver(found->second, c10::DispatchKey::CPU, input));
  }
  return views;
}

std::vector<at::Tensor> deviceResults(const std::vector<at::Tensor>& results, c10::DeviceIndex device,
                                      const std::vector<at::Tensor>& inputs,
                                      const std::vector<at::Tensor>& host_inputs) {
  TORCH_CHECK(inputs.size() == host_inputs.size(), "internal error: inputs and their host views differ in number");
  requireHostAddressable("sharing a compiled neuron graph's results with the device");
  std::unordered_map<const c10::StorageImpl*, c10::Storage> device_storage;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (isNeuron(inputs[i]) && host_inputs[i].defined()) {
      device_storage.emplace(host_inputs[i].storage().unsafeGetStorageImpl(), inputs[i].storage());
    }
  }
  std::vector<at::Tensor> converted;
  converted.reserve(results.size());
  for (const auto& result : results) {
    if (!result.defined() || !result.device().is_cpu()) {
      converted.push_back(result);
      continue;
    }
    TORCH_CHECK(result.layout() == c10::kStrided, "a compiled neuron graph returned a ", result.layout(),
                " tensor; neuron tensors are strided");
    const c10::StorageImpl* storage = result.storage().unsafeGetStorageImpl();
    auto found = device_storage.find(storage);
    if (found == device_storage.end()) {
      found = device_storage.emplace(storage, shareAsDevice(result.storage(), device)).first;
    }
    converted.push_back(tensorOver(found->second, c10::DispatchKey::PrivateUse1, result));
  }
  return converted;
}

}  // namespace torch_neuronx
