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

TEST(Topology, Trn2_48xlargeHas64CoresAtLnc2And128AtLnc1) {
  Topology lnc2 = Topology::fromEnvironment("trn2", "16", nullptr, nullptr, nullptr);
  EXPECT_EQ(lnc2.coreCount(), 64);
  EXPECT_EQ(lnc2.core(63).chip, 15);
  EXPECT_EQ(lnc2.core(63).hbm_bytes, std::size_t{24} << 30);
  Topology lnc1 = Topology::fromEnvironment("trn2", "16", "1", nullptr, nullptr);
  EXPECT_EQ(lnc1.coreCount(), nrt::kMaxLogicalCores);
  EXPECT_EQ(lnc1.core(127).logical_id, 127);
  EXPECT_EQ(lnc1.core(127).physical_first, 7);
  EXPECT_EQ(lnc1.core(127).hbm_bytes, std::size_t{12} << 30);
}

TEST(Topology, Trn1_32xlargeAndTrn3) {
  Topology trn1 = Topology::fromEnvironment("trn1", "16", nullptr, nullptr, nullptr);
  EXPECT_EQ(trn1.coreCount(), 32);
  EXPECT_EQ(trn1.deviceName(), "NeuronCore-v2 (trn1, LNC=1)");
  Topology trn3 = Topology::fromEnvironment("trn3", nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(trn3.coreCount(), 4);
  EXPECT_EQ(trn3.core(0).hbm_bytes, std::size_t{36} << 30);  // 144 GiB / 8 physical x LNC 2
  EXPECT_EQ(trn3.deviceName(), "NeuronCore-v4 (trn3, LNC=2)");
  Topology trn3_lnc1 = Topology::fromEnvironment("trn3", "2", "1", nullptr, nullptr);
  EXPECT_EQ(trn3_lnc1.coreCount(), 16);
  EXPECT_EQ(trn3_lnc1.core(15).hbm_bytes, std::size_t{18} << 30);
}

TEST(Topology, MoreCoresThanOneProcessCanUseIsAClearError) {
  try {
    Topology::fromEnvironment("trn2", "17", "1", nullptr, nullptr);
    FAIL() << "17 chips at LNC=1 (136 cores) was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("136 logical NeuronCores"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NEURON_RT_VISIBLE_CORES"), std::string::npos) << e.what();
  }
  // Selecting some of them is fine.
  Topology some = Topology::fromEnvironment("trn2", "17", "1", "128-135", nullptr);
  EXPECT_EQ(some.coreCount(), 8);
  EXPECT_EQ(some.core(0).chip, 16);
}
