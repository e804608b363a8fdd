#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "nki_runtime/Random.h"

namespace nki {
namespace {

TEST(Random, OneSeedGivesOneSequencePerLane) {
  EngineGenerators a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint32_t x = a.at(Engine::kVector, 5, 2).next();
    EXPECT_EQ(x, b.at(Engine::kVector, 5, 2).next());
  }
  EXPECT_NE(a.at(Engine::kGpSimd, 0, 0).next(), c.at(Engine::kGpSimd, 0, 0).next());
  // Lanes and an engine's generators start apart.
  EXPECT_NE(a.at(Engine::kVector, 0, 0).next(), a.at(Engine::kVector, 0, 1).next());
  EXPECT_NE(a.at(Engine::kVector, 0, 0).next(), a.at(Engine::kVector, 1, 0).next());
}

TEST(Random, SeedingAnEngineRestartsOnlyIt) {
  EngineGenerators g(1);
  g.seed(Engine::kVector, 77);
  const uint32_t first = g.at(Engine::kVector, 3, 0).next();
  const uint32_t gpsimd = g.at(Engine::kGpSimd, 3, 0).next();
  g.seed(Engine::kVector, 77);
  EXPECT_EQ(first, g.at(Engine::kVector, 3, 0).next());
  EXPECT_NE(gpsimd, g.at(Engine::kGpSimd, 3, 0).next());  // GpSimd's generator kept going
}

TEST(Random, UniformIsInTheUnitIntervalWithMeanHalf) {
  EngineGenerators generators(9);
  Xorwow& g = generators.at(Engine::kGpSimd, 127, 0);
  Xorwow copy = g;
  constexpr int kDraws = 200000;
  double sum = 0;
  std::set<uint32_t> distinct;
  for (int i = 0; i < kDraws; ++i) {
    const float u = copy.uniform();
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
    if (i < 1000) distinct.insert(g.next());
  }
  EXPECT_NEAR(sum / kDraws, 0.5, 6 * std::sqrt(1.0 / 12 / kDraws));
  EXPECT_EQ(distinct.size(), 1000u);
}

TEST(Random, LanesPastTheCoreAreRefused) {
  EngineGenerators g(0);
  EXPECT_THROW(g.at(Engine::kVector, kRandomLanes, 0), std::out_of_range);
}

}  // namespace
}  // namespace nki
