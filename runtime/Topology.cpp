#include "Topology.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace nrt {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

PlatformSpec platformNamed(const std::string& name) {
  // Dense BF16 TFLOPS per chip, from AWS's architecture pages (Trainium,
  // Trainium2, Trainium3).
  if (name == "trn2") return {"trn2", "NeuronCore-v3", 8, 96 * kGiB, 2, 667.0 / 8};
  if (name == "trn3") return {"trn3", "NeuronCore-v4", 8, 144 * kGiB, 2, 671.0 / 8};
  if (name == "trn1") return {"trn1", "NeuronCore-v2", 2, 32 * kGiB, 1, 190.0 / 2};
  throw std::invalid_argument("TORCH_NEURONX_PLATFORM='" + name +
                              "' is not a known platform (expected trn2, trn3 or trn1)");
}

int parsePositiveInt(const std::string& text, const char* variable) {
  std::size_t used = 0;
  long value = -1;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0 || value > 1024) {
    throw std::invalid_argument(std::string(variable) + "='" + text +
                                "' is not a positive integer");
  }
  return static_cast<int>(value);
}

std::string orDefault(const char* value, const std::string& fallback) {
  return (value && *value) ? std::string(value) : fallback;
}

}  // namespace

std::vector<int> parseCoreList(const std::string& text, const char* variable) {
  std::vector<int> ids;
  std::stringstream items(text);
  std::string item;
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(std::string(variable) + "='" + text + "' is invalid: " + why);
  };
  if (!text.empty() && text.back() == ',') throw bad("empty entry");
  while (std::getline(items, item, ',')) {
    if (item.empty()) throw bad("empty entry");
    auto dash = item.find('-');
    try {
      std::size_t used = 0;
      if (dash == std::string::npos) {
        int id = std::stoi(item, &used);
        if (used != item.size() || id < 0) throw bad("'" + item + "' is not a core id");
        ids.push_back(id);
      } else {
        std::string lo_text = item.substr(0, dash), hi_text = item.substr(dash + 1);
        std::size_t used_hi = 0;
        int lo = std::stoi(lo_text, &used), hi = std::stoi(hi_text, &used_hi);
        if (used != lo_text.size() || used_hi != hi_text.size() || lo < 0 || hi < lo)
          throw bad("'" + item + "' is not a range of core ids");
        for (int id = lo; id <= hi; ++id) ids.push_back(id);
      }
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find(variable) == 0) throw;
      throw bad("'" + item + "' is not a core id");
    } catch (const std::out_of_range&) {
      throw bad("'" + item + "' is out of range");
    }
  }
  if (ids.empty()) throw bad("no core ids");
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Topology Topology::fromEnvironment(const char* platform, const char* chips,
                                   const char* lnc, const char* visible,
                                   const char* num_cores) {
  Topology t;
  t.platform_ = platformNamed(orDefault(platform, "trn2"));
  t.chips_ = parsePositiveInt(orDefault(chips, "1"), "TORCH_NEURONX_CHIPS");
  t.lnc_ = parsePositiveInt(orDefault(lnc, std::to_string(t.platform_.default_lnc)),
                            "NEURON_LOGICAL_NC_CONFIG");
  if (t.lnc_ != 1 && t.lnc_ != 2) {
    throw std::invalid_argument("NEURON_LOGICAL_NC_CONFIG='" + std::string(lnc) +
                                "' is invalid: expected 1 or 2");
  }
  if (t.platform_.name == "trn1" && t.lnc_ != 1) {
    throw std::invalid_argument("NEURON_LOGICAL_NC_CONFIG=2 is not supported on trn1");
  }
  const int per_chip = t.logicalCoresPerChip();
  const int total = per_chip * t.chips_;
  if (total > kMaxLogicalCores && !(visible && *visible) && !(num_cores && *num_cores)) {
    throw std::invalid_argument(
        "TORCH_NEURONX_CHIPS=" + std::to_string(t.chips_) + " at LNC=" + std::to_string(t.lnc_) + " gives " +
        std::to_string(total) + " logical NeuronCores, more than the " + std::to_string(kMaxLogicalCores) +
        " one process can use; select some with NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES");
  }

  std::vector<int> ids;
  if (visible && *visible) {
    ids = parseCoreList(visible, "NEURON_RT_VISIBLE_CORES");
  } else {
    for (int id = 0; id < total; ++id) ids.push_back(id);
  }
  if (num_cores && *num_cores) {
    int wanted = parsePositiveInt(num_cores, "NEURON_RT_NUM_CORES");
    if (wanted > static_cast<int>(ids.size())) {
      throw std::invalid_argument("NEURON_RT_NUM_CORES=" + std::string(num_cores) + " asks for more than the " +
                                  std::to_string(ids.size()) + " available NeuronCores");
    }
    ids.resize(wanted);
  }
  const std::size_t hbm_per_physical = t.platform_.hbm_bytes_per_chip / t.platform_.physical_cores_per_chip;
  for (int id : ids) {
    if (id >= total) {
      throw std::invalid_argument("NEURON_RT_VISIBLE_CORES names core " + std::to_string(id) + " but this " +
                                  t.platform_.name + " instance has " + std::to_string(total) +
                                  " logical NeuronCores (0-" + std::to_string(total - 1) + ")");
    }
    t.cores_.push_back({id, id / per_chip, (id % per_chip) * t.lnc_, t.lnc_, hbm_per_physical * t.lnc_});
  }
  if (t.coreCount() > kMaxLogicalCores) {
    throw std::invalid_argument("NEURON_RT_VISIBLE_CORES selects " + std::to_string(t.coreCount()) +
                                " logical NeuronCores, more than the " + std::to_string(kMaxLogicalCores) +
                                " one process can use");
  }
  return t;
}

const Topology& Topology::instance() {
  static const Topology topology = [] {
    try {
      return fromEnvironment(std::getenv("TORCH_NEURONX_PLATFORM"), std::getenv("TORCH_NEURONX_CHIPS"),
                             std::getenv("NEURON_LOGICAL_NC_CONFIG"), std::getenv("NEURON_RT_VISIBLE_CORES"),
                             std::getenv("NEURON_RT_NUM_CORES"));
    } catch (const std::exception& e) {
      Topology invalid;
      invalid.error_ = e.what();
      return invalid;
    }
  }();
  return topology;
}

const LogicalCore& Topology::core(int index) const {
  if (index < 0 || index >= coreCount()) {
    throw std::out_of_range("NeuronCore index " + std::to_string(index) + " is out of range: " +
                            std::to_string(coreCount()) + " NeuronCore(s) visible");
  }
  return cores_[index];
}

std::string Topology::deviceName() const {
  return platform_.core_generation + " (" + platform_.name + ", LNC=" + std::to_string(lnc_) + ")";
}

}  // namespace nrt
