#include "aten/ops/FallbackAccounting.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <c10/util/Exception.h>

namespace torch_neuronx {
namespace {

std::mutex mutex;
std::map<std::string, int64_t> counts;

bool fallbackDisabled() {
  static const bool disabled = [] {
    const char* value = std::getenv("TORCH_NEURONX_DISABLE_CPU_FALLBACK");
    return value && (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0);
  }();
  return disabled;
}

}  // namespace

bool lacksHardwareSupport(c10::ScalarType dtype) {
  return dtype == c10::kDouble || c10::isComplexType(dtype);
}

void noteCpuFallback(const std::string& op, c10::ScalarType dtype) {
  const std::string key = op + " (" + c10::toString(dtype) + ")";
  TORCH_CHECK_NOT_IMPLEMENTED(!fallbackDisabled(), key, " is not supported by NeuronCore hardware (no ",
                              c10::toString(dtype), " compute), and CPU fallback is disabled by ",
                              "TORCH_NEURONX_DISABLE_CPU_FALLBACK=1");
  bool first_ever = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    first_ever = counts.empty();
    ++counts[key];
  }
  // One warning per process: printing a tensor alone runs five float64 ops.
  if (first_ever) {
    TORCH_WARN(key, " is not supported by NeuronCore hardware and would run on the CPU on Trainium. ",
               "It and any later such op are counted as CPU fallbacks (torch_neuronx.fallback_report()); ",
               "set TORCH_NEURONX_DISABLE_CPU_FALLBACK=1 to make them errors.");
  }
}

std::map<std::string, int64_t> cpuFallbackCounts() {
  std::lock_guard<std::mutex> lock(mutex);
  return counts;
}

void resetCpuFallbackCounts() {
  std::lock_guard<std::mutex> lock(mutex);
  counts.clear();
}

}  // namespace torch_neuronx
