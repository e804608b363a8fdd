// A NeuronCore belongs to one process at a time, as on Trainium: the first
// allocation on a core claims its physical cores for this process, and a
// second live process that tries gets CoreBusy naming the holder.
//
// A claim is an flock on one file per physical core (in
// TORCH_NEURONX_CORE_LOCK_DIR, default /tmp/torch-neuronx-cores), so it ends
// with the process however that ends. TORCH_NEURONX_SHARE_CORES=1 lets a
// process use cores without claiming them, for tests that run several
// processes on one core on purpose.
#pragma once

#include <stdexcept>
#include <string>

namespace nrt {

class CoreBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Claims physical cores [first, first + count) of `chip` for this process,
// for logical core `logical_id`. Throws CoreBusy when another live process
// holds one of them, std::runtime_error when the lock files cannot be made.
void claimPhysicalCores(int logical_id, int chip, int first, int count);

}  // namespace nrt
