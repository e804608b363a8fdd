// CPU tensors over the bytes of neuron tensors, without copying, for all code
// that runs CPU work on device memory in place: the op layer's CPU kernels
// (ops/CpuAlias.h), compiled graphs (compile/GraphBridge.h) and collectives
// (distributed/HostBuffer.h). Host addresses come from the runtime
// (runtime/HostAccess.h), and this is where such code refuses device memory
// that the CPU cannot address.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_neuronx {

bool isNeuron(const at::Tensor& t);

// Refuses `work` when the runtime's device memory is not host-addressable,
// saying why it needs to be.
void requireHostAddressable(const char* work);

// Whether CPU code will write through an alias or only read. A copy-on-write
// storage (a lazy clone's, torch's _lazy_clone) gets its own bytes before it is
// written, as on the CPU device; read, it stays shared with its clones.
enum class AliasUse { kRead, kWrite };

// The host address of the whole storage of neuron tensor `t` (not of its
// first element). Refuses a storage whose bytes are not device memory of t's
// core, naming them.
void* storageHostAddress(const at::Tensor& t, AliasUse use = AliasUse::kWrite);

// A tensor over `storage` dispatched as `key`, with `like`'s dtype, sizes,
// strides, storage offset and conjugate/negative bits.
at::Tensor tensorOver(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like);

// The whole storage of nested tensor `nested` as a 1-D tensor of its dtype.
at::Tensor nestedStorage(const at::Tensor& nested);

// A nested tensor over 1-D `storage` with the nested sizes, strides and offsets of `like`.
at::Tensor nestedOver(const at::Tensor& storage, const at::Tensor& like);

// A CPU tensor over the memory of neuron tensor `t`, for CPU code that may write it (any other tensor, and an
// undefined one, passes through; a nested tensor gives a nested one). If a CPU kernel resizes the alias, the new
// memory comes from t's core (aliasGrowthAllocator); the op layer's
// syncFromAlias() moves it to `t`.
at::Tensor cpuAlias(const at::Tensor& t, AliasUse use = AliasUse::kWrite);

// cpuAlias for an operand the CPU code only reads.
inline at::Tensor cpuReadAlias(const at::Tensor& t) { return cpuAlias(t, AliasUse::kRead); }

// The CPU alias for `t` in a call that already aliased `other` as `other_alias`: that very alias when they
// are one tensor; a view over its alias storage when both are strided views of one storage, so that a CPU
// kernel's overlap checks see what they share (else an out= over part of an input is written while it is
// still read); nullopt otherwise.
std::optional<at::Tensor> aliasBeside(const at::Tensor& t, const at::Tensor& other, const at::Tensor& other_alias);

}  // namespace torch_neuronx
