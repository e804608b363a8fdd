// nki.collectives: data moved between the ranks of a job (the NeuronCores
// that run the same kernel). On Trainium the collective engines move it over
// NeuronLink; here the executor packs what an instruction sends, hands it to
// the run's Communicator (the Python layer, over torch.distributed) and
// unpacks what comes back into the instruction's dst.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nki_runtime/Dtype.h"
#include "nki_runtime/Program.h"

namespace nki {

struct Bound;

// What a kCollective instruction does: coefficients[0]. The rest of the coefficients, which the
// communicator reads: [1] the collective dim, [2] the number of rank-lists (permute: of pairs),
// [3] their length (permute: 2), then the ranks, list after list.
enum class CollectiveKind : int32_t {
  kAllReduce,      // dst = op0 over the group's srcs
  kAllGather,      // dst = the group's srcs side by side along the collective dim, in group order
  kReduceScatter,  // dst = this rank's share (along dim 0) of op0 over the group's srcs
  kAllToAll,       // dst chunk j (along dim 0) = src chunk (this rank's place) of group member j
  kPermute,        // dst = the src of the rank whose (source, target) pair targets this rank
  kRankId,         // dst (one int32 register) = this rank's id
  // Variable lengths, src and dst as flat element buffers, inputs[1] the uint32 metadata [rows, members]
  // (rows 0, 1: send counts and offsets per member; 2: receive counts, written unless coefficients[1] has
  // bit 1; 3: receive offsets when it has bit 2, else member s's chunk lands at s * (dst elements / members)).
  kAllToAllV,      // chunk j of src (row 0, 1 column j) to member j
  kAllGatherV,     // one chunk (row 0, 1 column 0) to every member
  // The ring of each rank-list (collective_permute_implicit): member i sends to member i + 1 (mod length).
  kRingPermute,    // dst = the src of this rank's predecessor in its list (HBM or SBUF)
  kRingRankId,     // dst (one int32 register) = the rank `coefficients[1]` places before this one in its list
  kRingPermuteReduce,  // as kRingPermute, sending op0(inputs[0], inputs[1]) element by element
  kGroupIndex,     // dst (one int32 register) = this rank's place in its rank-list
};

// Flags of the variable-length kinds, in coefficients[1].
constexpr int32_t kRecvCountsKnown = 1;
constexpr int32_t kHasRecvDisplacements = 2;

CollectiveKind collectiveKind(const Instruction& in);

// Carries one collective out with the other ranks: takes the instruction's coefficients, reduction
// operator, dtype and the bytes this rank sends (its src in row-major order; nothing for kRankId) and
// returns the bytes it receives (dst's elements in row-major order; kAllGather: each member's src in
// group order; empty when nothing comes, as for a rank no permute pair targets). The variable-length
// kinds send a uint32 element count per chunk (per member; kAllGatherV: one), then the chunks, and
// receive a uint32 count per member, then the members' chunks, in group order.
using Communicator = std::function<std::vector<char>(const std::vector<float>& coefficients, AluOp op, Dtype dtype,
                                                     const std::vector<char>& sent)>;

void collective(const Bound& b);

}  // namespace nki
