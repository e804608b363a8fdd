// Row-parallel loops for bandwidth-bound kernels (the one-row matmuls of
// decoding), on helper threads that stay awake for a moment between calls.
//
// A decode step runs one matrix-vector product after another, a few dozen
// microseconds apart. One core alone reads memory at half the machine's
// bandwidth, so each product needs a second core; but an OpenMP worker that
// sleeps between products (OMP_WAIT_POLICY=passive, which ./dev sets so that
// OpenBLAS is not starved) takes about as long to wake as the work takes.
// These helpers spin for a bounded time after each loop (then sleep), and the
// caller never waits for a helper that has not started: it claims the loop's
// chunks itself, so a sleeping or preempted helper costs nothing but its share.
#pragma once

#include <cstdint>
#include <functional>

namespace torch_neuronx {

// Threads the device's own kernels use: TORCH_NEURONX_NUM_THREADS, else
// OMP_NUM_THREADS, else every CPU this process may run on. A NeuronCore's
// engines are not the host's intra-op threads, so torch.set_num_threads()
// (which torch sets to the physical cores it counts, one on some VMs) does
// not limit them.
int deviceThreads();

// Runs body(begin, end) over [0, rows) in chunks of at least `min_chunk` rows,
// on the calling thread and whichever helpers join. Runs inline when the rows
// make one chunk, when deviceThreads() is 1, inside a parallel region, while
// another thread is using the helpers, or while helpers have recently been
// slower than none (another process holds the cores).
void parallelRows(int64_t rows, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body);

}  // namespace torch_neuronx
