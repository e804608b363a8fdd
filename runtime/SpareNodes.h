// Map and set nodes kept from erasures for the next insertion, so that a loop
// of small ops moves nodes between containers instead of going through the
// heap for each allocation and free.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace nrt {

constexpr std::size_t kSpareNodes = 64;

template <typename Node>
void keepSpare(std::vector<Node>& spares, Node&& node) {
  if (spares.size() < kSpareNodes) spares.push_back(std::move(node));
}

}  // namespace nrt
