// The boxed fallback for every op without a native neuron kernel: the op's
// ATen CPU kernel runs directly on device memory through zero-copy aliases
// (CpuAlias.h). Nothing is copied to or from the host.
//
// It also does what a device backend must: check that tensors are on one
// core, run on that core, and give random ops the core's generator.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/core/NeuronGenerator.h"
#include "aten/core/KernelMemory.h"
#include "aten/core/NeuronGuard.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/FallbackAccounting.h"
#include "aten/ops/HostKernelFallback.h"

namespace torch_neuronx {
namespace {

using c10::IValue;

bool isGeneratorArgument(const c10::Argument& argument) {
  c10::TypePtr type = argument.real_type();
  if (type->kind() == c10::OptionalType::Kind) type = type->expectRef<c10::OptionalType>().getElementType();
  return type->kind() == c10::GeneratorType::Kind;
}

struct CallState {
  const c10::OperatorHandle& op;
  std::optional<c10::DeviceIndex> device;
  std::optional<c10::ScalarType> unsupported_dtype;
  // (neuron tensor, its CPU alias) for every tensor argument.
  std::vector<std::pair<at::Tensor, at::Tensor>> aliases;
};

// Advanced indexing (index, index_put_): indices on another device than the tensor indexed get ATen's
// own words, which CUDA gives too and PyTorch's tests match.
bool indexesTensor(const CallState& state) {
  const std::string& name = state.op.operator_name().name;
  return name.rfind("aten::index", 0) == 0 || name == "aten::_index_put_impl_";
}

[[noreturn]] void indicesOnAnotherDevice(const c10::Device& indexed) {
  TORCH_CHECK(false, "indices should be either on ", c10::kCPU, " or on the same device as the indexed tensor (",
              indexed, ")");
}

void claimDevice(CallState& state, const at::Tensor& t, const c10::Argument& argument) {
  const auto index = t.device().index();
  if (!state.device) {
    state.device = index;
    return;
  }
  if (*state.device != index && argument.name() == "indices" && indexesTensor(state)) {
    indicesOnAnotherDevice(c10::Device(c10::DeviceType::PrivateUse1, *state.device));
  }
  TORCH_CHECK(*state.device == index, "Expected all tensors to be on the same device, but found at least two ",
              "devices, neuron:", static_cast<int>(*state.device), " and neuron:", static_cast<int>(index), " (in ",
              c10::toString(state.op.operator_name()), ", argument '", argument.name(), "')");
}

// Views of one neuron storage get CPU aliases over one CPU storage (aliasBeside).
at::Tensor aliasSharingStorage(const CallState& state, const at::Tensor& t, AliasUse use) {
  for (const auto& [original, alias] : state.aliases) {
    if (auto beside = aliasBeside(t, original, alias)) return *beside;
  }
  return cpuAlias(t, use);
}

// An out= or in-place argument, or a list of them (Tensor(a!)[]).
bool isWritten(const c10::Argument& argument) {
  const c10::AliasInfo* info = argument.alias_info();
  if (!info) return false;
  if (info->isWrite()) return true;
  for (const c10::AliasInfo& contained : info->containedTypes()) {
    if (contained.isWrite()) return true;
  }
  return false;
}

// A copy-on-write storage that the kernel writes gets bytes of its own before any alias is taken, so
// that the aliases of its other views (operands only read) are over those bytes too, not over the ones
// its lazy clones keep.
void materializeIfWritten(const IValue& value, const c10::Argument& argument) {
  if (!isWritten(argument)) return;
  auto materialize = [](const at::Tensor& t) {
    if (isNeuron(t) && t.has_storage()) (void)t.storage().mutable_data();
  };
  if (value.isTensor()) materialize(value.toTensor());
  if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) materialize(t);
  }
}

// A nested tensor's sizes, strides and offsets are CPU tensors on every device, so the ops that build one
// over a device buffer take them from the CPU, as CUDA's kernels do.
bool isNestedMetadata(const c10::OperatorHandle& op, const c10::Argument& argument) {
  const std::string& name = op.operator_name().name;
  const bool builds_nested = name == "aten::_nested_view_from_buffer" ||
                             name == "aten::_nested_view_from_buffer_copy" || name == "aten::_nested_from_padded";
  return builds_nested && argument.name() != "self" && argument.name() != "padded" && argument.name() != "out";
}

// Checks one tensor argument and returns what the CPU kernel gets instead.
at::Tensor bridgeTensor(CallState& state, const at::Tensor& t, const c10::Argument& argument, bool cpu_allowed) {
  if (!t.defined()) return t;
  if (!isNeuron(t)) {
    // A CPU scalar may be read, never written (out=, an in-place self), as CUDA requires.
    const bool written = isWritten(argument);
    if (!cpu_allowed && argument.name() == "self" && t.dim() > 0 && indexesTensor(state)) {
      indicesOnAnotherDevice(t.device());  // a CPU tensor indexed by neuron indices
    }
    TORCH_CHECK(cpu_allowed || (t.device().is_cpu() && t.dim() == 0 && !written) ||
                    (t.device().is_cpu() && isNestedMetadata(state.op, argument)),
                "Expected all tensors to be on ",
                "the same device, but got ", t.device(), " for argument '", argument.name(), "' of ",
                c10::toString(state.op.operator_name()), ", where a neuron tensor is required");
    return t;
  }
  // One tensor passed twice (out=self) gets one alias: the CPU kernel then sees an in-place call.
  for (const auto& [original, alias] : state.aliases) {
    if (original.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return alias;
  }
  claimDevice(state, t, argument);
  if (!state.unsupported_dtype && lacksHardwareSupport(t.scalar_type())) state.unsupported_dtype = t.scalar_type();
  at::Tensor alias = aliasSharingStorage(state, t, isWritten(argument) ? AliasUse::kWrite : AliasUse::kRead);
  state.aliases.emplace_back(t, alias);
  return alias;
}

IValue bridgeArgument(CallState& state, const IValue& value, const c10::Argument& argument) {
  if (value.isTensor()) return bridgeTensor(state, value.toTensor(), argument, false);
  if (value.isTensorList()) {
    c10::List<at::Tensor> bridged;
    for (const at::Tensor& t : value.toTensorList()) bridged.push_back(bridgeTensor(state, t, argument, false));
    return bridged;
  }
  if (value.isOptionalTensorList()) {
    // Index lists may stay on the CPU, as CUDA allows.
    c10::List<std::optional<at::Tensor>> bridged;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      bridged.push_back(t.has_value() ? std::optional<at::Tensor>(bridgeTensor(state, *t, argument, true))
                                      : std::nullopt);
    }
    return bridged;
  }
  if (value.isDevice() && value.toDevice().type() == c10::DeviceType::PrivateUse1) {
    const auto device = value.toDevice();
    if (!state.device) state.device = device.has_index() ? device.index() : currentDevice();
    return c10::Device(c10::DeviceType::CPU);
  }
  return value;
}

IValue resultToNeuron(CallState& state, const IValue& value) {
  auto convert = [&](const at::Tensor& t) -> at::Tensor {
    for (const auto& [original, alias] : state.aliases) {
      if (alias.defined() && t.unsafeGetTensorImpl() == alias.unsafeGetTensorImpl()) return original;
    }
    return fromCpuResult(t, *state.device, state.aliases);
  };
  if (value.isTensor()) return convert(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> converted;
    for (const at::Tensor& t : value.toTensorList()) converted.push_back(convert(t));
    return converted;
  }
  return value;
}

void hostKernelFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t first = stack->size() - arguments.size();
  CallState state{op, std::nullopt, std::nullopt, {}};
  std::vector<size_t> generator_slots;
  for (size_t i = 0; i < arguments.size(); ++i) materializeIfWritten((*stack)[first + i], arguments[i]);
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (isGeneratorArgument(arguments[i])) {
      generator_slots.push_back(first + i);
      continue;
    }
    (*stack)[first + i] = bridgeArgument(state, (*stack)[first + i], arguments[i]);
  }
  if (!state.device) state.device = currentDevice();
  for (size_t slot : generator_slots) {
    IValue& value = (*stack)[slot];
    std::optional<at::Generator> generator;
    if (value.isGenerator()) generator = value.toGenerator();
    value = engineFor(generator, *state.device);
  }
  // Nested tensors run the CPU device's nested kernels over their aliased storage.
  bool nested = false;
  for (const auto& entry : state.aliases) nested = nested || entry.second.is_nested();
  const auto host_key = nested ? c10::DispatchKey::NestedTensorCPU : c10::DispatchKey::CPU;
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasComputedKernelForDispatchKey(host_key), "The operator '",
                              c10::toString(op.operator_name()), "' is not implemented for the neuron device",
                              nested ? " with nested tensors" : "");
  if (state.unsupported_dtype) noteCpuFallback(c10::toString(op.operator_name()), *state.unsupported_dtype);

  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, *state.device));
  KernelMemoryScope scope(*state.device);
  op.redispatchBoxed(c10::DispatchKeySet(host_key), stack);

  for (size_t i = 0; i < arguments.size(); ++i) {
    if (isWritten(arguments[i])) {
      for (const auto& [original, alias] : state.aliases) syncFromAlias(alias, original);
      break;
    }
  }
  const size_t returns = schema.returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) (*stack)[i] = resultToNeuron(state, (*stack)[i]);
}

bool returnsAView(const c10::FunctionSchema& schema) {
  for (const auto& result : schema.returns()) {
    if (result.alias_info() && !result.alias_info()->isWrite()) return true;
  }
  return false;
}

// Ops that have a CPU kernel but reach PrivateUse1 through a generic kernel:
// structured ops (shape, allocate, .out), and ops whose CompositeExplicit
// kernel is a decomposition (native_layer_norm, addr, ...) that would round
// differently from the CPU device and run several kernels instead of one.
bool reachesNeuronGenerically(const c10::OperatorHandle& op) {
  using c10::DispatchKey;
  if (!op.hasKernelForDispatchKey(DispatchKey::CPU) || op.hasKernelForDispatchKey(DispatchKey::PrivateUse1)) {
    return false;
  }
  return op.hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutogradNonFunctional) ||
         (op.hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutograd) && !returnsAView(op.schema()));
}

// Ops with a nested kernel for CPU (linear, matmul, softmax, ...) and a composite one: the composite
// would take nested neuron tensors first and ask them for sizes they do not have.
void routeNestedOpsToHostKernels() {
  static std::unique_ptr<torch::Library> library;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::NestedTensorPrivateUse1,
                                             __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::NestedTensorCPU) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::NestedTensorPrivateUse1)) {
      continue;
    }
    const std::string unqualified =
        name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    library->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&hostKernelFallback>());
  }
}

}  // namespace

void routeStructuredOpsToHostKernels() {
  static std::unique_ptr<torch::Library> library;
  if (library) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                                             __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !reachesNeuronGenerically(*op)) continue;
    const std::string unqualified =
        name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    library->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&hostKernelFallback>());
  }
  // Generic kernels that reject devices they do not know: mode's out= form, and conj_physical_
  // (its composite kernel calls the CPU's DispatchStub for the tensor's own device). ldexp's composite
  // kernel takes the exact route (C's ldexp) on devices with an ldexp kernel and elsewhere multiplies by
  // pow(2, other) in self's dtype, which overflows (float16 ldexp(2^-10, 20) gave inf for 1024).
  for (const char* name : {"mode.values", "conj_physical_", "ldexp.Tensor", "ldexp.out", "ldexp_"}) {
    library->impl(name, torch::CppFunction::makeFromBoxedFunction<&hostKernelFallback>());
  }
  routeNestedOpsToHostKernels();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&hostKernelFallback>()); }
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&hostKernelFallback>());
}

}  // namespace torch_neuronx
