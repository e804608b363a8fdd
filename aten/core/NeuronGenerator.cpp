#include "aten/core/NeuronGenerator.h"

#include <deque>
#include <mutex>

#include "aten/core/NeuronGuard.h"

namespace torch_neuronx {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) { engine_.set_current_seed(seed); }
void NeuronGeneratorImpl::set_offset(uint64_t offset) { engine_.set_offset(offset); }
uint64_t NeuronGeneratorImpl::get_offset() const { return engine_.get_offset(); }
uint64_t NeuronGeneratorImpl::current_seed() const { return engine_.current_seed(); }
uint64_t NeuronGeneratorImpl::seed() { return engine_.seed(); }

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  engine_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index());
  copy->engine_ = engine_.clone();
  return copy;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::deque<at::Generator> generators;  // deque: references stay valid
  const c10::DeviceIndex index = device < 0 ? currentDevice() : device;
  checkDeviceIndex(index);
  std::lock_guard<std::mutex> lock(mutex);
  while (static_cast<c10::DeviceIndex>(generators.size()) <= index) {
    const auto next = static_cast<c10::DeviceIndex>(generators.size());
    generators.push_back(at::make_generator<NeuronGeneratorImpl>(next));
  }
  return generators[index];
}

at::Generator newGenerator(c10::DeviceIndex device) {
  const c10::DeviceIndex index = device < 0 ? currentDevice() : device;
  checkDeviceIndex(index);
  return at::make_generator<NeuronGeneratorImpl>(index);
}

at::Generator engineFor(const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  const at::Generator& chosen = (generator.has_value() && generator->defined()) ? *generator : defaultGenerator(device);
  TORCH_CHECK(chosen.device().type() == c10::DeviceType::PrivateUse1,
              "expected a neuron generator for an op on neuron, but got a generator on ", chosen.device());
  return chosen.get<NeuronGeneratorImpl>()->engine();
}

}  // namespace torch_neuronx
