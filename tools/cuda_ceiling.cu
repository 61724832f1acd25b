// tools/cuda_ceiling.cu: what one kernel launch can read from HBM on this GPU, measured the
// way kernels/cuda/cmd/cudabench times the GEMVs (CUDA-graph replay of R back-to-back launches
// rotating over >= 240 MB, median of 5 replays / R). It separates the fixed cost of a launch
// inside a graph from the streaming rate, with and without programmatic dependent launch
// (PDL), so the decode GEMV's figures can be read against a kernel that does nothing but read.
//
// Build here:  nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o out/cuda/ceiling tools/cuda_ceiling.cu
// Run there:   out/cuda/ceiling
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <functional>
#include <vector>

#include "../kernels/cuda/csrc/qgemm_common.cuh" // ldg_stream: the GEMVs' streaming load

#include "cuda_check.h"


// mode 0: plain. mode 1: PDL, wait before the first load (launch overlap only).
// mode 2: PDL, loads issued before the wait (the weights of a GEMV never depend on the
// previous kernel), wait before the result is written.
// mode 3: PDL + cp.async.bulk.prefetch.L2 of the block's whole range before the wait, then
// the loads after the wait (a GEMV that cannot hold its weights in registers).
template <int MODE>
__global__ void __launch_bounds__(256) read_kernel(const uint4 *__restrict__ p, size_t n, unsigned *out) {
  if (MODE != 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (MODE == 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  const size_t per = (n + gridDim.x - 1) / gridDim.x; // contiguous range per block
  const size_t b0 = blockIdx.x * per, b1 = min(n, b0 + per);
  if (MODE == 3) {
    if (threadIdx.x == 0 && b1 > b0) {
      const char *s = reinterpret_cast<const char *>(p + b0);
      size_t bytes = (b1 - b0) * 16;
      for (size_t off = 0; off < bytes; off += 65536) {
        unsigned sz = (unsigned)min((size_t)65536, bytes - off);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(s + off), "r"(sz) : "memory");
      }
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  unsigned acc = 0;
  size_t i = b0 + threadIdx.x;
  for (; i + 3 * 256 < b1; i += 4 * 256) {
    uint4 a = ldg_stream(p + i), b = ldg_stream(p + i + 256), c = ldg_stream(p + i + 512),
          d = ldg_stream(p + i + 768);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < b1; i += 256) {
    uint4 a = ldg_stream(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (MODE == 2) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc; // never true for random data; keeps loads
}

__global__ void empty_kernel(int mode) {
  if (mode) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
}

__global__ void fill(uint4 *p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_uint4((unsigned)(i * 2654435761u), (unsigned)(i >> 7) * 40503u + 1, (unsigned)i ^ 0x5bd1e995u, 7u);
}

int main() {
  int dev = 0, sms = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const size_t total = (size_t)1 << 30;
  uint4 *buf;
  unsigned *out;
  CK(cudaMalloc(&buf, total));
  CK(cudaMalloc(&out, 1 << 20));
  fill<<<1024, 256>>>(buf, total / 16);
  CK(cudaDeviceSynchronize());
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  printf("copy 1 GiB: %.0f GB/s (read + write; cuda_check.h copy_gbs, as cudabench)\n", copy_gbs(st));
  for (int pdl = 0; pdl < 2; pdl++) {
    float us = time_graph_us(st, [&](int) {
      cudaLaunchAttribute at;
      cudaLaunchConfig_t cfg = launch_config(st, sms, 256, pdl != 0, at);
      CK(cudaLaunchKernelEx(&cfg, empty_kernel, pdl));
    }, 200);
    printf("empty kernel (%d blocks) in a graph, pdl=%d: %.2f us per launch\n", sms, pdl, us);
  }
  const double sizes[] = {1.18, 4.72, 18.9, 64}; // 256 MB: see BENCHMARKS.md (dropped)
  const int bpsm[] = {1, 2, 4, 8};
  printf("| bytes (MB) | blocks/SM | mode | us per launch | GB/s | %% of copy |\n|---|---|---|---|---|---|\n");
  for (double mb : sizes) {
    const size_t n = ((size_t)(mb * 1e6) / 16 + 255) / 256 * 256;
    const size_t span = std::max((size_t)(240e6 / 16), n * 4);
    const int R = (int)std::max<size_t>(8, std::min<size_t>(200, span / n));
    const size_t slots = std::max<size_t>(1, (total / 16 - n) / n);
    for (int b : bpsm) {
      for (int mode = 0; mode < 4; mode++) {
        float us = time_graph_us(st, [&](int r) {
          cudaLaunchAttribute at;
          cudaLaunchConfig_t cfg = launch_config(st, sms * b, 256, mode != 0, at);
          const uint4 *p = buf + (size_t)(r % slots) * n;
          switch (mode) {
          case 0: CK(cudaLaunchKernelEx(&cfg, read_kernel<0>, p, n, out)); break;
          case 1: CK(cudaLaunchKernelEx(&cfg, read_kernel<1>, p, n, out)); break;
          case 2: CK(cudaLaunchKernelEx(&cfg, read_kernel<2>, p, n, out)); break;
          case 3: CK(cudaLaunchKernelEx(&cfg, read_kernel<3>, p, n, out)); break;
          }
        }, R);
        const char *names[] = {"plain", "pdl-wait-first", "pdl-loads-first", "pdl-l2-prefetch"};
        printf("| %.2f | %d | %s | %.2f | %.0f | - |\n", n * 16 / 1e6, b, names[mode], us, n * 16 / us / 1e3);
      }
    }
  }
  return 0;
}
