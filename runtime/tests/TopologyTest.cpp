#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/Topology.h"

using nrt::Topology;

TEST(Topology, DefaultIsOneTrn2ChipAtLnc2) {
  Topology t = Topology::fromEnvironment(nullptr, nullptr, nullptr, nullptr, nullptr);
  ASSERT_TRUE(t.valid());
  EXPECT_EQ(t.coreCount(), 4);
  EXPECT_EQ(t.lnc(), 2);
  EXPECT_EQ(t.core(0).hbm_bytes, std::size_t{24} << 30);
  EXPECT_EQ(t.core(3).physical_first, 6);
  EXPECT_EQ(t.core(3).physical_count, 2);
}

TEST(Topology, Lnc1DoublesTheCoresAndHalvesTheirMemory) {
  Topology t = Topology::fromEnvironment(nullptr, nullptr, "1", nullptr, nullptr);
  EXPECT_EQ(t.coreCount(), 8);
  EXPECT_EQ(t.core(7).hbm_bytes, std::size_t{12} << 30);
}

TEST(Topology, VisibleCoresSelectLogicalIds) {
  Topology t = Topology::fromEnvironment(nullptr, "2", nullptr, "2-5", nullptr);
  ASSERT_EQ(t.coreCount(), 4);
  EXPECT_EQ(t.core(0).logical_id, 2);
  EXPECT_EQ(t.core(2).logical_id, 4);
  EXPECT_EQ(t.core(2).chip, 1);
}

TEST(Topology, NumCoresTakesTheFirstN) {
  Topology t = Topology::fromEnvironment(nullptr, nullptr, nullptr, nullptr, "2");
  EXPECT_EQ(t.coreCount(), 2);
}

TEST(Topology, Trn1HasTwoCoresOf16GiB) {
  Topology t = Topology::fromEnvironment("trn1", nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(t.coreCount(), 2);
  EXPECT_EQ(t.core(1).hbm_bytes, std::size_t{16} << 30);
}

TEST(Topology, InvalidValuesNameTheVariable) {
  auto message = [](auto&&... args) {
    try {
      Topology::fromEnvironment(args...);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(nullptr, nullptr, "3", nullptr, nullptr).find("NEURON_LOGICAL_NC_CONFIG"), std::string::npos);
  EXPECT_NE(message(nullptr, nullptr, nullptr, "0-9", nullptr).find("NEURON_RT_VISIBLE_CORES"), std::string::npos);
  EXPECT_NE(message(nullptr, nullptr, nullptr, "a,b", nullptr).find("NEURON_RT_VISIBLE_CORES"), std::string::npos);
  EXPECT_NE(message(nullptr, nullptr, nullptr, nullptr, "x").find("NEURON_RT_NUM_CORES"), std::string::npos);
  EXPECT_NE(message(nullptr, nullptr, nullptr, nullptr, "9").find("NEURON_RT_NUM_CORES"), std::string::npos);
  EXPECT_NE(message("trn9", nullptr, nullptr, nullptr, nullptr).find("TORCH_NEURONX_PLATFORM"), std::string::npos);
}

TEST(Topology, CoreListParsing) {
  EXPECT_EQ(nrt::parseCoreList("3,1,1-2", "X"), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(nrt::parseCoreList("2-1", "X"), std::invalid_argument);
  EXPECT_THROW(nrt::parseCoreList("", "X"), std::invalid_argument);
  EXPECT_THROW(nrt::parseCoreList("1,", "X"), std::invalid_argument);
}
