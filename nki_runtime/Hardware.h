// The limits of a NeuronCore that a kernel must respect, per generation, from
// AWS's NKI programming guide and Trainium architecture guides
// (awsdocs-neuron.readthedocs-hosted.com: nki/arch/trainium_inferentia2_arch,
// nki/arch/trainium2_arch, nki/api/nki.language tile_size).
#pragma once

#include <cstdint>
#include <string_view>

namespace nki {

struct CoreLimits {
  std::string_view name;
  int partitions;                // SBUF and PSUM partitions (nl.tile_size.pmax)
  int64_t sbuf_partition_bytes;  // SBUF bytes per partition
  int psum_banks;                // PSUM banks per partition
  int64_t psum_bank_bytes;       // one accumulation tile: 512 fp32 (nl.tile_size.psum_fmax)
  int stationary_free;           // nl.tile_size.gemm_stationary_fmax
  int moving_free;               // nl.tile_size.gemm_moving_fmax
  bool microscaling;             // quantize_mx and nc_matmul_mx (NeuronCore-v4 and newer)
  bool tensor_indirection;       // NkiTensor.indirect operands of compute instructions (NeuronCore-v4 and newer)
};

// NeuronCore-v2 (trn1): SBUF 24 MiB, PSUM 2 MiB.
constexpr CoreLimits kNeuronCoreV2{"NeuronCore-v2", 128, 192 << 10, 8, 2048, 128, 512, false, false};
// NeuronCore-v3 (trn2): SBUF 28 MiB, PSUM 2 MiB.
constexpr CoreLimits kNeuronCoreV3{"NeuronCore-v3", 128, 224 << 10, 8, 2048, 128, 512, false, false};
// NeuronCore-v4 (trn3): SBUF 32 MiB, PSUM 2 MiB.
constexpr CoreLimits kNeuronCoreV4{"NeuronCore-v4", 128, 256 << 10, 8, 2048, 128, 512, true, true};

}  // namespace nki
