#include "runtime/SimdLevel.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include <sys/syscall.h>
#include <unistd.h>

namespace nrt {
namespace {

// Linux hands out the AMX tile state only to processes that ask for it (arch_prctl, kernel 5.16+).
bool requestTileState() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

SimdLevel detect() {
  __builtin_cpu_init();
  SimdLevel level = SimdLevel::kScalar;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = SimdLevel::kAvx2;
  if (__builtin_cpu_supports("avx512f")) level = SimdLevel::kAvx512;
  if (level == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512bf16")) level = SimdLevel::kAvx512Bf16;
  if (level == SimdLevel::kAvx512Bf16 && __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("amx-tile") &&
      requestTileState()) {
    level = SimdLevel::kAmx;
  }
  const char* requested = std::getenv("TORCH_NEURONX_SIMD");
  if (requested == nullptr || *requested == '\0') return level;  // empty: not set
  const std::string name(requested);
  const std::pair<const char*, SimdLevel> names[] = {{"scalar", SimdLevel::kScalar},
                                                     {"avx2", SimdLevel::kAvx2},
                                                     {"avx512", SimdLevel::kAvx512},
                                                     {"avx512bf16", SimdLevel::kAvx512Bf16},
                                                     {"amx", SimdLevel::kAmx}};
  for (const auto& [known, wanted] : names) {
    if (name == known) return std::min(level, wanted);
  }
  throw std::invalid_argument("TORCH_NEURONX_SIMD=" + name + ": expected one of scalar, avx2, avx512, avx512bf16, amx");
}

}  // namespace

SimdLevel simdLevel() {
  // A function-local static: static initialisers elsewhere may already ask.
  static const SimdLevel level = detect();
  return level;
}

}  // namespace nrt
