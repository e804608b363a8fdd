// The random number generators of the Vector and GpSimd engines: one XORWOW
// generator (Marsaglia, "Xorshift RNGs", 2003: five words of xorshift state
// and a Weyl counter) per GpSimd compute lane and four per Vector lane, which
// is what nisa.rand_set_state loads (6 and 24 uint32 per partition). The
// states live for one run of a program, as the engines keep theirs for one
// NEFF execution; a run starts them from the seed its caller passes.
//
// The hardware's bit streams are not published: a kernel gets the same
// distribution, determinism under a seed and state round trips, not
// Trainium's very numbers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

struct Bound;

struct Xorwow {
  std::array<uint32_t, 5> x{};
  uint32_t weyl = 0;
  uint32_t next();
  float uniform();  // [0, 1), 24 bits
};

constexpr int kRandomLanes = 128;  // compute lanes, one per partition
constexpr int kWordsPerGenerator = 6;

// The generators of one run.
class EngineGenerators {
 public:
  explicit EngineGenerators(uint64_t seed);
  // Generators of each lane on an engine: 4 on Vector, 1 on GpSimd.
  static int perLane(Engine engine) { return engine == Engine::kGpSimd ? 1 : 4; }
  Xorwow& at(Engine engine, int64_t lane, int64_t generator);
  // Every generator of the engine from one value (nisa.set_rng_seed, nl.random_seed).
  void seed(Engine engine, uint64_t value);

 private:
  std::vector<Xorwow> vector_, gpsimd_;
};

void randomBits(const Bound& b);
void randomUniform(const Bound& b);
void dropout(const Bound& b);
void setRandomState(const Bound& b);
void getRandomState(const Bound& b);
void seedRandom(const Bound& b);

}  // namespace nki
