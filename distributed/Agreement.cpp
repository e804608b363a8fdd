#include "distributed/Agreement.h"

#include <c10/core/ScalarType.h>

#include <sstream>

namespace torch_neuronx::distributed {

const char* collectiveName(c10d::OpType op) {
  switch (op) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "all_reduce_coalesced";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case c10d::OpType::REDUCE: return "reduce";
    case c10d::OpType::GATHER: return "gather";
    case c10d::OpType::SCATTER: return "scatter";
    case c10d::OpType::ALLTOALL: return "all_to_all";
    case c10d::OpType::ALLTOALL_BASE: return "all_to_all_single";
    case c10d::OpType::SEND: return "send";
    case c10d::OpType::RECV: return "recv";
    case c10d::OpType::RECVANYSOURCE: return "recv from any source";
    case c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED: return "all_gather_into_tensor_coalesced";
    case c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED: return "reduce_scatter_tensor_coalesced";
    case c10d::OpType::BARRIER: return "barrier";
    default: return "collective";
  }
}

const char* reduceOpName(int op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "none";
}

std::string describe(const StepDescriptor& d) {
  std::ostringstream out;
  out << collectiveName(static_cast<c10d::OpType>(d.op));
  if (d.op != static_cast<int32_t>(c10d::OpType::BARRIER)) {
    out << " of " << d.numel << " " << c10::toString(static_cast<c10::ScalarType>(d.dtype)) << " elements";
  }
  if (d.count > 1) out << " in " << d.count << " tensors";
  if (d.root >= 0) out << " from root " << d.root;
  if (d.reduce >= 0) out << " with " << reduceOpName(d.reduce);
  return out.str();
}

std::optional<std::string> disagreement(const StepDescriptor& mine, const std::vector<StepDescriptor>& all,
                                        const std::vector<std::string>& reasons) {
  if (mine.count == kAbandoned) return std::nullopt;  // this rank raised already
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].count != kAbandoned) continue;
    std::ostringstream message;
    message << "neuron process group: rank " << r << " raised in its "
            << collectiveName(static_cast<c10d::OpType>(all[r].op)) << " instead of joining this "
            << collectiveName(static_cast<c10d::OpType>(mine.op)) << ": " << reasons[r];
    return message.str();
  }
  bool agree = true;
  for (const auto& d : all) agree = agree && d == all[0];
  if (agree) return std::nullopt;
  std::ostringstream message;
  message << "neuron process group: ranks called mismatched collectives (every rank must pass the same sizes, "
             "dtypes, root and op):";
  for (size_t r = 0; r < all.size(); ++r) message << "\n  rank " << r << ": " << describe(all[r]);
  return message.str();
}

}  // namespace torch_neuronx::distributed
