/* The machine's fp32 multiply-add peak, measured: every thread runs chains of
 * independent vector FMAs on registers (no memory traffic), all threads at once.
 * The matmul benchmark divides by this instead of a peak computed from the
 * clock, which /proc/cpuinfo reports as the base clock (boost runs higher) and
 * which cannot tell whether a core has one FMA unit or two.
 *
 *   fma_peak LEVEL THREADS     LEVEL avx512 or avx2; prints GFLOP/s (the best of 5 runs)
 *
 * Built by benchmarks/common.py with the environment's C compiler, no -m flags:
 * each kernel names its own target, and LEVEL is checked against the CPU first.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Chains in flight: FMA latency (4 cycles) x units (2) = 8 are needed; 12 leave slack. */
#define CHAINS 12
#define STEPS 10000000L  /* about 20 ms a run on one core */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The sum keeps the compiler from dropping the chains; each returns FLOPs done. */
static volatile float sink;

__attribute__((target("avx512f"))) static double chainsAvx512(void) {
  __m512 acc[CHAINS];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 12
  for (int c = 0; c < CHAINS; ++c) acc[c] = _mm512_set1_ps((float)c);
  for (long s = 0; s < STEPS; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < CHAINS; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 total = acc[0];
  for (int c = 1; c < CHAINS; ++c) total = _mm512_add_ps(total, acc[c]);
  sink = _mm512_reduce_add_ps(total);
  return 2.0 * 16 * CHAINS * STEPS;
}

__attribute__((target("avx2,fma"))) static double chainsAvx2(void) {
  __m256 acc[CHAINS];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 12
  for (int c = 0; c < CHAINS; ++c) acc[c] = _mm256_set1_ps((float)c);
  for (long s = 0; s < STEPS; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < CHAINS; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 total = acc[0];
  for (int c = 1; c < CHAINS; ++c) total = _mm256_add_ps(total, acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  sink = lanes[0];
  return 2.0 * 8 * CHAINS * STEPS;
}

typedef double (*Kernel)(void);

struct Start {
  pthread_barrier_t barrier;
  Kernel kernel;
};

struct Worker {
  struct Start* start;
  double begin, end, flops;
};

static void* work(void* arg) {
  struct Worker* worker = arg;
  pthread_barrier_wait(&worker->start->barrier);
  worker->begin = now();
  worker->flops = worker->start->kernel();
  worker->end = now();
  return NULL;
}

/* GFLOP/s of `threads` threads running `kernel` together, from the first one's start to the last one's
 * end: each thread times itself, since the thread that started them may run last after the barrier. */
static double onceAcross(Kernel kernel, int threads) {
  struct Start start = {.kernel = kernel};
  struct Worker workers[256];
  pthread_t ids[256];
  pthread_barrier_init(&start.barrier, NULL, (unsigned)threads);
  for (int t = 0; t < threads; ++t) {
    workers[t].start = &start;
    pthread_create(&ids[t], NULL, work, &workers[t]);
  }
  double begin = 0, end = 0, flops = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(ids[t], NULL);
    if (t == 0 || workers[t].begin < begin) begin = workers[t].begin;
    if (workers[t].end > end) end = workers[t].end;
    flops += workers[t].flops;
  }
  pthread_barrier_destroy(&start.barrier);
  return flops / (end - begin) / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s avx512|avx2 THREADS\n", argv[0]);
    return 2;
  }
  const int threads = atoi(argv[2]);
  if (threads < 1 || threads > 256) {
    fprintf(stderr, "THREADS must be 1..256, got %s\n", argv[2]);
    return 2;
  }
  __builtin_cpu_init();
  Kernel kernel;
  if (strcmp(argv[1], "avx512") == 0 && __builtin_cpu_supports("avx512f")) {
    kernel = chainsAvx512;
  } else if (strcmp(argv[1], "avx2") == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernel = chainsAvx2;
  } else {
    fprintf(stderr, "level %s is not available on this CPU\n", argv[1]);
    return 3;
  }
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const double gflops = onceAcross(kernel, threads);
    if (gflops > best) best = gflops;
  }
  printf("%.1f\n", best);
  return 0;
}
