// tools/cuda_large_trace.cu: a per-chunk timeline of the large-M wgmma kernel (qgemm_large.cu
// built with its %globaltimer probes, DSV4_LG_TRACE). For each (format, shape, M) it runs the
// library's call (dsv4c_qgemm_large, whatever tiles and staging it picks; the DSV4GO_QGEMM_*
// knobs apply) back to back over rotating weight copies, then traces one more call behind a
// synchronization, and prints, as medians over the blocks' first units, in us:
//   start      the block's first instruction, from the earliest block's
//   wait       the producer passes griddepcontrol.wait (from the block's start)
//   issue[c]   the producer starts chunk c (its ring slot is free), from the block's start
//   full[c]    chunk c's consumer finds the chunk landed (full barrier complete)
//   lat[c]     full[c] - issue[c]: how long chunk c's copies take to land (for the chunks
//              loaded before the wait, from the wait)
//   end        the consumers' last store done (word 15), from the block's start
// The question it answers: whether a consumer waiting at the full barrier waits for copies
// issued long before (slow copies) or for a producer that issued late (a full ring).
// Build (make cuda-tools): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
//   -Ikernels/cuda/csrc -Itools -o out/cuda/large_trace tools/cuda_large_trace.cu
// Usage on the GPU machine: large_trace [M ...] (default 128 160 256); knobs by environment.
#define DSV4_LG_TRACE 1
#include "qgemm_large.cu"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "cuda_check.h"      // tools/cuda_check.h
#include "cuda_large_bufs.h" // tools/cuda_large_bufs.h

static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void trace(const char *name, int fmt, int N, int K, int M) {
  LargeBufs b(fmt, N, K, M);
  const int npad = b.npad, copies = b.copies;
  std::vector<uint8_t *> &w = b.w, &s = b.s;
  __nv_bfloat16 *x = b.x;
  float *y = b.y;
  const unsigned cap = 4096;
  unsigned long long *rec;
  CK(cudaMalloc(&rec, (size_t)cap * LGT_WORDS * 8));
  CK(cudaMemcpyToSymbol(g_lgtrace, &rec, sizeof(rec)));
  CK(cudaMemcpyToSymbol(g_lgtrace_cap, &cap, sizeof(cap)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto call = [&](int k) {
    const int e = dsv4c_qgemm_large(fmt, w[k % copies], s[k % copies], N, npad, K, 1.f, x, K, y, N, M, 0, 0, st);
    if (e) {
      fprintf(stderr, "call: %d\n", e);
      exit(1);
    }
  };
  for (int k = 0; k < 2 * copies; k++) call(k); // warm: pools, tensor maps, caches
  CK(cudaStreamSynchronize(st));
  const unsigned zero = 0;
  CK(cudaMemcpyToSymbol(g_lgtrace_n, &zero, sizeof(zero)));
  CK(cudaMemset(rec, 0, (size_t)cap * LGT_WORDS * 8));
  call(2 * copies); // the next copy: its weights last touched `copies` calls ago
  CK(cudaStreamSynchronize(st));
  unsigned n = 0;
  CK(cudaMemcpyFromSymbol(&n, g_lgtrace_n, sizeof(n)));
  n = std::min(n, cap);
  std::vector<unsigned long long> h((size_t)n * LGT_WORDS);
  CK(cudaMemcpy(h.data(), rec, h.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull;
  for (unsigned b = 0; b < n; b++) t0 = std::min(t0, h[(size_t)b * LGT_WORDS + 2]);
  std::vector<double> start, wait, end;
  std::vector<std::vector<double>> issue(64), full(64), lat(64);
  int nch = 0;
  for (unsigned b = 0; b < n; b++) {
    const unsigned long long *r = &h[(size_t)b * LGT_WORDS];
    const double bs = (double)r[2];
    start.push_back((bs - t0) * 1e-3);
    if (r[4]) wait.push_back((r[4] - bs) * 1e-3);
    if (r[15]) end.push_back((r[15] - bs) * 1e-3);
    for (int c = 0; c < 64; c++) {
      if (!r[16 + c] || !r[80 + c]) continue;
      nch = std::max(nch, c + 1);
      issue[c].push_back((r[16 + c] - bs) * 1e-3);
      full[c].push_back((r[80 + c] - bs) * 1e-3);
      // chunks loaded before the wait: their copies started before it, x's only after it
      const double from = std::max((double)r[16 + c], r[4] ? (double)r[4] : 0.0);
      lat[c].push_back((r[80 + c] - from) * 1e-3);
    }
  }
  printf("%-6s fmt %d N %5d K %5d M %5d: %u blocks, start median %.2f max %.2f, wait %.2f, end %.2f us\n", name, fmt, N,
         K, M, n, median(start), start.empty() ? 0 : *std::max_element(start.begin(), start.end()), median(wait),
         median(end));
  printf("  chunk:");
  for (int c = 0; c < nch; c++) printf(" %6d", c);
  printf("\n  issue:");
  for (int c = 0; c < nch; c++) printf(" %6.2f", median(issue[c]));
  printf("\n  full: ");
  for (int c = 0; c < nch; c++) printf(" %6.2f", median(full[c]));
  printf("\n  lat:  ");
  for (int c = 0; c < nch; c++) printf(" %6.2f", median(lat[c]));
  printf("\n");
  fflush(stdout);
  cudaFree(rec);
  cudaStreamDestroy(st);
}

int main(int argc, char **argv) {
  CK(cudaSetDevice(0));
  std::vector<int> ms;
  for (int i = 1; i < argc; i++) ms.push_back(atoi(argv[i]));
  if (ms.empty()) ms = {128, 160, 256};
  for (int m : ms) {
    trace("w2", DSV4C_FMT_NVFP4, 4096, 2048, m);
    trace("w1/w3", DSV4C_FMT_NVFP4, 2048, 4096, m);
    trace("wo_b", DSV4C_FMT_NVFP4, 4096, 8192, m);
  }
  return 0;
}
