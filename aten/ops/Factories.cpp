// Tensor allocation on neuron: every device tensor's memory comes from here
// (or is adopted by CpuAlias.cpp), so memory stats and capacity stay true.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>

#include "aten/core/NeuronAllocator.h"
#include "aten/core/NeuronGuard.h"

namespace torch_neuronx {
namespace {

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex targetDevice(std::optional<c10::Device> device) {
  const auto index = (device && device->has_index()) ? device->index() : currentDevice();
  checkDeviceIndex(index);
  return index;
}

// torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory (its
// default): new memory holds NaN, or an integer dtype's largest value, as on CPU and CUDA, so that a read
// of memory nothing wrote shows the same way on every run.
at::Tensor filledIfDeterministic(at::Tensor tensor) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(tensor);
  }
  return tensor;
}

void checkLayout(std::optional<c10::Layout> layout) {
  TORCH_CHECK_NOT_IMPLEMENTED(!layout || *layout == c10::kStrided, "neuron tensors must be strided, got layout ",
                              *layout);
}

at::Tensor empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                 std::optional<c10::Device> device, std::optional<bool> pin_memory,
                 std::optional<c10::MemoryFormat> memory_format) {
  checkLayout(layout);
  TORCH_CHECK(!pin_memory.value_or(false), "only CPU tensors can be pinned");
  const auto index = targetDevice(device);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return filledIfDeterministic(
      at::detail::empty_generic(size, &neuronAllocator(), kNeuronKeys, c10::dtype_or_default(dtype), memory_format));
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                        std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pin_memory) {
  checkLayout(layout);
  TORCH_CHECK(!pin_memory.value_or(false), "only CPU tensors can be pinned");
  const auto index = targetDevice(device);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return filledIfDeterministic(at::detail::empty_strided_generic(size, stride, &neuronAllocator(), kNeuronKeys,
                                                                 c10::dtype_or_default(dtype)));
}

// A zero tensor: the ZeroTensor key and no memory, as autograd's zero gradients
// use; torch's ZeroTensor fallback materialises it where an op needs values.
at::Tensor efficientZeroTensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  checkLayout(layout);
  TORCH_CHECK(!pin_memory.value_or(false), "only CPU tensors can be pinned");
  const c10::Device neuron(c10::DeviceType::PrivateUse1, targetDevice(device));
  // The storage keeps a pointer to its allocator: one per core, never freed.
  static std::mutex lock;
  static std::unordered_map<int, at::native::ZeroTensorAllocator*> allocators;
  at::native::ZeroTensorAllocator* allocator;
  {
    std::lock_guard<std::mutex> guard(lock);
    auto& slot = allocators[neuron.index()];
    if (!slot) slot = new at::native::ZeroTensorAllocator(neuron);
    allocator = slot;
  }
  const auto keys = kNeuronKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, allocator, keys, c10::dtype_or_default(dtype), std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("_efficientzerotensor", TORCH_FN(efficientZeroTensor));
}

}  // namespace torch_neuronx
