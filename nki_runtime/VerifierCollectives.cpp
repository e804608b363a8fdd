#include "nki_runtime/Checker.h"
#include "nki_runtime/Collectives.h"

namespace nki {
namespace {

// Whether a and b have the same sizes on every axis but `axis`, and b's is `times` a's there.
bool scaledAlong(const Access& a, const Access& b, int axis, int64_t times) {
  if (a.rank != b.rank || axis < 0 || axis >= a.rank) return false;
  for (int x = 0; x < a.rank; ++x) {
    if (b.sizes[x] != (x == axis ? a.sizes[x] * times : a.sizes[x])) return false;
  }
  return true;
}

}  // namespace

// nki.collectives (AWS's nki.collectives API reference): src and dst both in HBM or both in SBUF, of
// one dtype (a collective moves or reduces data, it does not cast); all_to_all and collective_permute
// in HBM only; shapes as the kind implies for a group of `members` ranks.
void Checker::checkCollective(int i, const Instruction& in) {
  if (in.coefficients.size() < 4) return fail(i, "a collective needs its kind, dim and replica group");
  const CollectiveKind kind = collectiveKind(in);
  if (kind == CollectiveKind::kRankId || kind == CollectiveKind::kRingRankId || kind == CollectiveKind::kGroupIndex) {
    if (in.dst.elements() != 1 || tensor(in.dst).dtype != Dtype::kInt32) fail(i, "rank_id writes one int32 register");
    return;
  }
  if (kind == CollectiveKind::kAllToAllV || kind == CollectiveKind::kAllGatherV) return checkVariableCollective(i, in);
  const std::size_t sources = kind == CollectiveKind::kRingPermuteReduce ? 2 : 1;
  if (in.inputs.size() != sources) return fail(i, "a collective takes ", sources, " src per dst");
  if (sources == 2 && (tensor(in.inputs[1]).dtype != tensor(in.inputs[0]).dtype ||
                       tensor(in.inputs[1]).memory != tensor(in.inputs[0]).memory ||
                       in.inputs[1].elements() != in.inputs[0].elements())) {
    fail(i, "srcs0 and srcs1 must be alike: one dtype, one memory, one size");
  }
  const Access& src = in.inputs[0];
  const bool hbm_only = kind == CollectiveKind::kAllToAll || kind == CollectiveKind::kPermute;
  const std::initializer_list<Memory> hbm = {Memory::kHbm};
  const std::initializer_list<Memory> hbm_or_sbuf = {Memory::kHbm, Memory::kSbuf};
  requireMemory(i, in.dst, "dst", hbm_only ? hbm : hbm_or_sbuf);
  requireMemory(i, src, "src", hbm_only ? hbm : hbm_or_sbuf);
  if (tensor(src).memory != tensor(in.dst).memory) fail(i, "src and dst must both be in HBM or both in SBUF");
  if (tensor(src).dtype != tensor(in.dst).dtype) {
    fail(i, "src is ", name(tensor(src).dtype), " and dst ", name(tensor(in.dst).dtype),
         "; a collective does not cast");
  }
  const int axis = static_cast<int>(in.coefficients[1]);
  const auto members = static_cast<int64_t>(in.coefficients[3]);
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kPermute:
    case CollectiveKind::kRingPermute:
    case CollectiveKind::kRingPermuteReduce:
      if (src.elements() != in.dst.elements()) fail(i, "src and dst hold different numbers of elements");
      break;
    case CollectiveKind::kAllGather:
      if (!scaledAlong(src, in.dst, axis, members)) {
        fail(i, "dst must be src with ", members, " times its size along dim ", axis, " (one part per rank)");
      }
      break;
    case CollectiveKind::kReduceScatter:
      if (!scaledAlong(in.dst, src, 0, members)) {
        fail(i, "src must be dst with ", members, " times its size along dim 0 (one part per rank)");
      }
      break;
    case CollectiveKind::kAllToAll:
      if (!scaledAlong(src, in.dst, 0, 1) || src.sizes[0] % members != 0) {
        fail(i, "src and dst must have one shape whose dim 0 splits into ", members, " equal parts");
      }
      break;
    case CollectiveKind::kRankId:
    case CollectiveKind::kRingRankId:
    case CollectiveKind::kGroupIndex:
    case CollectiveKind::kAllToAllV:
    case CollectiveKind::kAllGatherV:
      break;
  }
  if ((kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
       kind == CollectiveKind::kRingPermuteReduce) &&
      in.op0 != AluOp::kAdd && in.op0 != AluOp::kMaximum && in.op0 != AluOp::kMinimum) {
    fail(i, "reduces with add, maximum or minimum only");
  }
}

// all_to_all_v and all_gather_v (AWS's API reference, NKI 0.6): one src and one dst in HBM, of one dtype, and
// the uint32 metadata, [rows, members] in HBM or [1, rows, members] in SBUF, contiguous: rows 3 or 4, 4 with
// receive offsets.
void Checker::checkVariableCollective(int i, const Instruction& in) {
  if (in.inputs.size() != 2) return fail(i, "takes a src and the metadata tensor");
  const Access &src = in.inputs[0], &metadata = in.inputs[1];
  requireMemory(i, in.dst, "dst", {Memory::kHbm});
  requireMemory(i, src, "src", {Memory::kHbm});
  requireMemory(i, metadata, "the metadata tensor", {Memory::kHbm, Memory::kSbuf});
  if (tensor(src).dtype != tensor(in.dst).dtype) {
    fail(i, "src is ", name(tensor(src).dtype), " and dst ", name(tensor(in.dst).dtype), "; a collective does not cast");
  }
  if (tensor(metadata).dtype != Dtype::kUInt32) fail(i, "the metadata must be uint32, not ", name(tensor(metadata).dtype));
  const auto members = static_cast<int64_t>(in.coefficients[3]);
  const bool displaced = (static_cast<int32_t>(in.coefficients[1]) & kHasRecvDisplacements) != 0;
  const int64_t rows = metadata.elements() / members;
  const bool on_chip = tensor(metadata).memory != Memory::kHbm;
  const bool shaped = metadata.rank == (on_chip ? 3 : 2) && (!on_chip || metadata.sizes[0] == 1) &&
                      metadata.sizes[metadata.rank - 1] == members && (rows == 4 || (rows == 3 && !displaced));
  if (!shaped) {
    fail(i, "the metadata must hold ", displaced ? "4" : "3 or 4", " rows of ", members, " (a column per member): [rows, ",
         members, "] in HBM or [1, rows, ", members, "] in SBUF");
  }
}

}  // namespace nki
