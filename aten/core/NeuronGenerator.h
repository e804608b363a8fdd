// The per-core random generator. Its engine is a CPU Philox/MT generator so
// that ATen's CPU random kernels, run on device memory, draw from exactly the
// state that torch.neuron.manual_seed / get_rng_state control.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace torch_neuronx {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The generator that CPU kernels receive in place of this one.
  at::Generator engine() const { return engine_; }

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  at::Generator engine_;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);
// A neuron generator (or none: the current core's default) as CPU kernels take it.
at::Generator engineFor(const std::optional<at::Generator>& generator, c10::DeviceIndex device);

}  // namespace torch_neuronx
