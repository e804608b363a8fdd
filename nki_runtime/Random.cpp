#include "nki_runtime/Random.h"

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "nki_runtime/Dtype.h"
#include "nki_runtime/Instructions.h"
#include "nki_runtime/RowLoops.h"

namespace nki {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): spreads one seed over many generators' words, none all zero.
uint64_t splitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void seedGenerators(std::vector<Xorwow>& generators, uint64_t seed) {
  uint64_t state = seed;
  for (Xorwow& g : generators) {
    for (uint32_t& word : g.x) word = static_cast<uint32_t>(splitMix(state) >> 32);
    g.weyl = static_cast<uint32_t>(splitMix(state) >> 32);
    if (g.x[0] == 0 && g.x[1] == 0 && g.x[2] == 0 && g.x[3] == 0 && g.x[4] == 0) g.x[0] = 1;
  }
}

EngineGenerators& generatorsOf(const Bound& b) {
  if (!b.random) throw std::logic_error("nki: a random instruction ran without the engines' generators");
  return *b.random;
}

// Calls element(generator, the row's offsets, index in the row, the element's offset in dst) for each
// element of dst in order; the elements of a partition take its lane's generators in turn.
template <typename Element>
void forEachElement(const Bound& b, Element element) {
  EngineGenerators& generators = generatorsOf(b);
  const Access& dst = b.in.dst;
  const int64_t n = inner(dst), step = innerStride(dst);
  const int64_t rows_per_lane = rowCount(dst) / dst.sizes[0];
  const int per_lane = EngineGenerators::perLane(b.in.engine);
  int64_t row = 0;
  forEachRow(dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    const int64_t lane = b.first_lane + row / rows_per_lane, first = (row % rows_per_lane) * n;
    for (int64_t j = 0; j < n; ++j) {
      element(generators.at(b.in.engine, lane, (first + j) % per_lane), o, j, o[0] + j * step);
    }
    ++row;
  });
}

uint32_t loadWord(const Bound& b, int k, int64_t element) {
  uint32_t word = 0;
  std::memcpy(&word, b.at(b.inputs[k], b.input_types[k], element), sizeof(word));
  return word;
}

void storeWord(const Bound& b, int64_t element, uint32_t word) {
  std::memcpy(b.at(b.dst, b.dst_type, element), &word, sizeof(word));
}

// A state tile: [lanes, 6 x generators per lane] uint32, the words of each generator in turn.
void forEachStateWord(const Bound& b, const Access& tile, const std::function<void(uint32_t&, int64_t)>& word) {
  EngineGenerators& generators = generatorsOf(b);
  const int per_lane = EngineGenerators::perLane(b.in.engine);
  for (int64_t p = 0; p < tile.sizes[0]; ++p) {
    for (int64_t w = 0; w < per_lane * kWordsPerGenerator; ++w) {
      Xorwow& g = generators.at(b.in.engine, b.first_lane + p, w / kWordsPerGenerator);
      const int64_t k = w % kWordsPerGenerator;
      word(k < 5 ? g.x[k] : g.weyl, tile.offset + p * tile.strides[0] + w * innerStride(tile));
    }
  }
}

}  // namespace

uint32_t Xorwow::next() {
  uint32_t t = x[4];
  const uint32_t s = x[0];
  x[4] = x[3];
  x[3] = x[2];
  x[2] = x[1];
  x[1] = s;
  t ^= t >> 2;
  t ^= t << 1;
  t ^= s ^ (s << 4);
  x[0] = t;
  weyl += 362437u;
  return t + weyl;
}

float Xorwow::uniform() { return static_cast<float>(next() >> 8) * (1.f / 16777216.f); }

EngineGenerators::EngineGenerators(uint64_t run_seed)
    : vector_(kRandomLanes * perLane(Engine::kVector)), gpsimd_(kRandomLanes * perLane(Engine::kGpSimd)) {
  seed(Engine::kVector, run_seed);
  seed(Engine::kGpSimd, run_seed ^ 0x5bd1e995u);
}

Xorwow& EngineGenerators::at(Engine engine, int64_t lane, int64_t generator) {
  if (lane < 0 || lane >= kRandomLanes) throw std::out_of_range("nki: no compute lane " + std::to_string(lane));
  return engine == Engine::kGpSimd ? gpsimd_[lane] : vector_[lane * perLane(engine) + generator];
}

void EngineGenerators::seed(Engine engine, uint64_t value) {
  seedGenerators(engine == Engine::kGpSimd ? gpsimd_ : vector_, value);
}

void randomBits(const Bound& b) {
  const std::size_t bytes = byteSize(b.dst_type);
  forEachElement(b, [&](Xorwow& g, const std::array<int64_t, 8>&, int64_t, int64_t element) {
    const uint32_t bits = g.next();
    std::memcpy(b.at(b.dst, b.dst_type, element), &bits, bytes);  // the low bytes (little-endian)
  });
}

void randomUniform(const Bound& b) {
  forEachElement(b, [&](Xorwow& g, const std::array<int64_t, 8>& o, int64_t, int64_t element) {
    float low = 0.f, high = 1.f;
    b.scalarOperand(b.in.operand0, o, low);
    b.scalarOperand(b.in.operand1, o, high);
    const float value = low + (high - low) * g.uniform();
    storeRow(&value, 1, b.at(b.dst, b.dst_type, element), 0, b.dst_type);
  });
}

void dropout(const Bound& b) {
  forEachElement(b, [&](Xorwow& g, const std::array<int64_t, 8>& o, int64_t j, int64_t element) {
    float rate = 0.f;
    b.scalarOperand(b.in.operand0, o, rate);
    float value = toFloat(b.at(b.inputs[0], b.input_types[0], o[1] + j * innerStride(b.in.inputs[0])), b.input_types[0]);
    if (g.uniform() < rate) value = 0.f;
    storeRow(&value, 1, b.at(b.dst, b.dst_type, element), 0, b.dst_type);
  });
}

void setRandomState(const Bound& b) {
  forEachStateWord(b, b.in.inputs[0], [&](uint32_t& word, int64_t element) { word = loadWord(b, 0, element); });
}

void getRandomState(const Bound& b) {
  forEachStateWord(b, b.in.dst, [&](uint32_t& word, int64_t element) { storeWord(b, element, word); });
}

void seedRandom(const Bound& b) {
  // A seed tile, or an immediate as two 16-bit halves (exact in the instruction's float coefficients).
  const uint32_t value = b.in.inputs.empty() ? (static_cast<uint32_t>(b.in.coefficients.at(0)) << 16) |
                                                   static_cast<uint32_t>(b.in.coefficients.at(1))
                                             : loadWord(b, 0, b.in.inputs[0].offset);
  generatorsOf(b).seed(b.in.engine, value);
}

}  // namespace nki
