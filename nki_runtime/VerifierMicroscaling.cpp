#include "nki_runtime/Checker.h"
#include "nki_runtime/Microscaling.h"

namespace nki {

bool Checker::checkPacked(int i, const Instruction& in) {
  const bool moves = in.opcode == Opcode::kDmaCopy || in.opcode == Opcode::kTensorCopy;
  const auto allowed = [&](const Access& access, int input) {
    const Dtype type = tensor(access).dtype;
    if (!isPacked(type)) return true;
    if (moves) return !in.inputs.empty() && tensor(in.inputs[0]).dtype == tensor(in.dst).dtype;
    if (in.opcode == Opcode::kQuantizeMx) return input < 0 && type != Dtype::kFloat4E2M1x4;
    return in.opcode == Opcode::kMatmulMx && (input == 0 || input == 1);
  };
  bool ok = allowed(in.dst, -1);
  for (std::size_t k = 0; ok && k < in.inputs.size(); ++k) ok = allowed(in.inputs[k], static_cast<int>(k));
  if (!ok) {
    fail(i, "packed MX data (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4) is written by quantize_mx ",
         "(fp8 only), read by nc_matmul_mx, and copied by dma_copy and tensor_copy to the same dtype only");
  }
  return ok;
}

bool Checker::requireMicroscaling(int i) {
  if (limits_.microscaling) return true;
  fail(i, "runs on NeuronCore-v4 (trn3) and newer; the kernel is checked for ", limits_.name,
       " (nki.jit(platform_target=\"trn3\"))");
  return false;
}

void Checker::checkScales(int i, const Access& scales, const Access& data, std::string_view role) {
  requireMemory(i, scales, role, {Memory::kSbuf});
  if (tensor(scales).dtype != Dtype::kUInt8) fail(i, role, " must be uint8, not ", name(tensor(scales).dtype));
  const int64_t K = data.sizes[0];
  const int64_t rows = K <= 32 ? K / 8 : scaleRow(K / 8 - 1, K) + 1;
  const bool tall_enough = K <= 32 ? scales.sizes[0] == rows : scales.sizes[0] >= rows;
  if (scales.rank != 2 || !tall_enough || scales.sizes[1] != data.sizes[1]) {
    fail(i, role, " must be [", rows, K <= 32 ? "" : "+", ", ", data.sizes[1], "] for data of ", K,
         " partitions (one scale per 8 partitions and packed element; above 32 partitions, each quadrant's ",
         "scales in its first 4 partitions)");
  }
}

void Checker::checkMatmulMx(int i, const Instruction& in) {
  if (!requireMicroscaling(i)) return;
  if (!checkTileProduct(i, in, 4, "takes packed [K, M] stationary and [K, N] moving tiles with their scales "
                                  "and writes [M, N]")) {
    return;
  }
  const Access &stationary = in.inputs[0], &moving = in.inputs[1];
  for (const Access* data : {&stationary, &moving}) {
    if (!isPacked(tensor(*data).dtype)) {
      fail(i, "multiplies packed MX tiles (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4), not ",
           name(tensor(*data).dtype));
    }
  }
  if (stationary.sizes[0] != moving.sizes[0] || !mxPartitions(stationary.sizes[0])) {
    fail(i, "stationary and moving must span the same partitions, a multiple of 32 up to 128, not ",
         stationary.sizes[0], " and ", moving.sizes[0]);
    return;
  }
  checkScales(i, in.inputs[2], stationary, "stationary_scale");
  checkScales(i, in.inputs[3], moving, "moving_scale");
}

void Checker::checkQuantizeMx(int i, const Instruction& in) {
  if (!requireMicroscaling(i)) return;
  const bool scales = in.opcode == Opcode::kQuantizeMxScales;
  if (in.inputs.size() != (scales ? 1u : 2u) || in.dst.rank != 2 || in.inputs[0].rank != 2) {
    fail(i, "quantizes a [P, F] tile into a [P, F / 4] packed tile and its scales");
    return;
  }
  const Access& src = in.inputs[0];
  requireMemory(i, src, "src", {Memory::kSbuf});
  requireMemory(i, in.dst, scales ? "dst_scale" : "dst", {Memory::kSbuf});
  const Dtype from = tensor(src).dtype;
  if (from != Dtype::kBFloat16 && from != Dtype::kFloat16) fail(i, "src must be bfloat16 or float16, not ", name(from));
  if (!mxPartitions(src.sizes[0]) || src.sizes[1] % 4 != 0) {
    fail(i, "src must span a multiple of 32 partitions up to 128 and a multiple of 4 elements, not [",
         src.sizes[0], ", ", src.sizes[1], "]");
    return;
  }
  Access packed = src;  // the shape of the packed data
  packed.sizes[1] = src.sizes[1] / 4;
  if (scales) {
    if (in.coefficients.size() != 1) fail(i, "takes the packed type's largest exponent");
    return checkScales(i, in.dst, packed, "dst_scale");
  }
  const Dtype to = tensor(in.dst).dtype;
  if (to != Dtype::kFloat8E5M2x4 && to != Dtype::kFloat8E4M3x4) {
    fail(i, "dst must be float8_e5m2_x4 or float8_e4m3fn_x4, not ", name(to));
  }
  if (in.dst.sizes[0] != src.sizes[0] || in.dst.sizes[1] != packed.sizes[1]) {
    fail(i, "dst must be [", src.sizes[0], ", ", packed.sizes[1], "] (four values per packed element), not [",
         in.dst.sizes[0], ", ", in.dst.sizes[1], "]");
  }
  checkScales(i, in.inputs[1], packed, "dst_scale");
}

}  // namespace nki
