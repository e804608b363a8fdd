// Emulated NeuronCore topology: which logical cores this process sees and how
// much HBM each one owns. Follows the Neuron runtime's environment variables:
//   NEURON_LOGICAL_NC_CONFIG  1 or 2 physical cores per logical core (trn2 default 2)
//   NEURON_RT_VISIBLE_CORES   logical core ids, e.g. "0", "1-2", "0,2"
//   NEURON_RT_NUM_CORES       number of cores to take, starting at core 0
// The emulator adds TORCH_NEURONX_PLATFORM (trn2 | trn3 | trn1) and
// TORCH_NEURONX_CHIPS (chips per instance, default 1; trn2.48xlarge and
// trn1.32xlarge have 16).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nrt {

// The most logical NeuronCores one process can see: a trn2.48xlarge at LNC=1
// (16 chips x 8). Every per-core table of the plugin is sized by it; PyTorch
// numbers devices with an int8_t, so 128 is also the most it can address.
inline constexpr int kMaxLogicalCores = 128;

struct PlatformSpec {
  std::string name;               // "trn2"
  std::string core_generation;    // "NeuronCore-v3"
  int physical_cores_per_chip;    // 8 on trn2
  std::size_t hbm_bytes_per_chip; // 96 GiB on trn2
  int default_lnc;                // 2 on trn2
  double bf16_tflops_per_physical_core;
};

struct LogicalCore {
  int logical_id;       // id in the instance-wide numbering
  int chip;
  int physical_first;   // first physical core backing this logical core
  int physical_count;   // LNC
  std::size_t hbm_bytes;
};

class Topology {
 public:
  // Parses the environment once. Never throws: a bad value leaves the
  // topology invalid with error() describing it.
  static const Topology& instance();

  // Builds a topology from explicit values; used by tests and by instance().
  // Throws std::invalid_argument naming the offending variable.
  static Topology fromEnvironment(const char* platform, const char* chips,
                                  const char* lnc, const char* visible,
                                  const char* num_cores);

  bool valid() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int coreCount() const { return static_cast<int>(cores_.size()); }
  const LogicalCore& core(int index) const;  // index among the visible cores
  const PlatformSpec& platform() const { return platform_; }
  int logicalCoresPerChip() const { return platform_.physical_cores_per_chip / lnc_; }
  int lnc() const { return lnc_; }
  int chips() const { return chips_; }
  std::string deviceName() const;  // "NeuronCore-v3 (trn2, LNC=2)"

 private:
  PlatformSpec platform_{};
  int lnc_ = 0;
  int chips_ = 0;
  std::vector<LogicalCore> cores_;
  std::string error_;
};

// Parses "0-3", "1,3", "2" into sorted unique ids; throws std::invalid_argument.
std::vector<int> parseCoreList(const std::string& text, const char* variable);

}  // namespace nrt
