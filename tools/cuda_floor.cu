// tools/cuda_floor.cu: the least time a decode GEMV launch can take when it waits for the launch
// before it, for each V4-Flash shape and M in {1, 4, 16}, measured with its weights free.
//
// A decode GEMV y = W x reads x, which the previous kernel of the step wrote. Whatever the
// design, a launch per GEMV starts its x-dependent work only after the previous grid has
// completed (griddepcontrol.wait under programmatic dependent launch, stream order without it),
// and the launch after it starts its own only after this grid has written y and completed.
// This tool times, the way cudabench times the GEMVs (a CUDA graph of R = 200 back-to-back
// launches with the PDL attribute, median of 5 replays / R), kernels that do only that part,
// each on grids of 33, 66, 132, 264 and 528 blocks of 256 threads (the best is reported):
//   empty: griddepcontrol.wait and nothing else (the chain's own cost per launch): a launch of
//          these sizes that waits for its predecessor takes no less, whatever else it does;
//   x+y:   griddepcontrol.wait, then read x (M x K bf16; each block one K-slice of at most
//          16 KB, all of x over the grid, every load issued before any store) and write y (M x
//          N float32, each block its share): the simplest way to do what every GEMV launch must
//          do after its wait, a reference rather than a strict bound.
// No weight is read and nothing is multiplied. The last column gives the least time the
// x-dependent multiplies take at the H200's dense bf16 tensor-core peak (989.4 TFLOP/s, the
// data-sheet figure; torch reached 767-801 in our runs), with the token dimension padded to the
// MMA's smallest N of 8 (2 * N * K * 8 * ceil(M / 8) flops).
//
// "time at 75 %" divides the NVFP4 call's bytes as cudabench counts them (packed E2M1 weights +
// E4M3 scales + bf16 x + float32 y) by 75 % of the copy bandwidth measured in the same process
// (tools/cuda_check.h copy_gbs, as cudabench).
//
// Build here:  make cuda-bins (out/cuda/floor), or
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o floor tools/cuda_floor.cu
// Run there:   out/cuda/floor
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"

namespace {

constexpr int kThreads = 256;
constexpr int kXSliceBytes = 16384; // at most this much x per block (a K-slice)
constexpr double kDenseBF16 = 989.4e12; // H200 SXM dense bf16 tensor peak, flop/s

// XY false: wait only. XY true: wait, stage this block's K-slice of x in shared memory, write
// this block's share of y (a value that depends on the staged x).
template <bool XY>
__global__ void __launch_bounds__(kThreads) floor_kernel(const uint4 *__restrict__ x, int xslice16, int nslices,
                                                          float *__restrict__ y, int ylen) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!XY) return;
  __shared__ uint4 xs[kXSliceBytes / 16];
  const int slice = blockIdx.x % nslices;
  constexpr int kPer = kXSliceBytes / 16 / kThreads; // 16-byte loads per thread, at most
  uint4 v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; j++) { // every load issued before any store: one L2 round trip
    const int i = threadIdx.x + j * kThreads;
    if (i < xslice16) v[j] = x[(size_t)slice * xslice16 + i];
  }
#pragma unroll
  for (int j = 0; j < kPer; j++) {
    const int i = threadIdx.x + j * kThreads;
    if (i < xslice16) xs[i] = v[j];
  }
  __syncthreads();
  const float s = __uint_as_float(reinterpret_cast<const uint32_t *>(xs)[threadIdx.x % (xslice16 * 4)] & 0x3fffffffu);
  const int per = (ylen + gridDim.x - 1) / gridDim.x;
  const int y0 = blockIdx.x * per, y1 = min(ylen, y0 + per);
  for (int i = y0 + threadIdx.x; i < y1; i += kThreads) y[i] = s + (float)i;
}

struct Shape {
  const char *name;
  int n, k;
};

} // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double bw = copy_gbs(st);
  uint4 *x;
  float *y;
  const size_t xbytes = 16 * 8192 * 2, ybytes = 16 * 32768 * 4;
  CK(cudaMalloc(&x, xbytes));
  CK(cudaMalloc(&y, ybytes));
  CK(cudaMemset(x, 0x3c, xbytes));
  printf("device %s, %d SMs; copy 1 GiB: %.0f GB/s (read + write)\n", prop.name, sms, bw);
  printf("a dependent decode GEMV launch with its weights free (PDL chain of 200, median of 5): us per launch\n");
  printf("| shape | M | NVFP4 bytes | time at 75 %% of copy | empty (best) | x+y (33 / 66 / 132 / 264 / 528 blocks) | x+y best, %% of the 75 %% time | "
         "x-dependent MMAs at the dense peak |\n|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {{"expert w1/w3 2048x4096", 2048, 4096}, {"expert w2 4096x2048", 4096, 2048},
                          {"attn wq_b 32768x1024", 32768, 1024}, {"attn wo_b 4096x8192", 4096, 8192},
                          {"attn wkv 512x4096", 512, 4096}};
  const int Ms[] = {1, 4, 16};
  const int R = 200;
  for (const Shape &sh : shapes) {
    for (int m : Ms) {
      const double bytes = (double)sh.n * sh.k / 2 + (double)sh.n * sh.k / 16 + 2.0 * m * sh.k + 4.0 * m * sh.n;
      const double t75 = bytes / (0.75 * bw * 1e3); // us
      const int xb = m * sh.k * 2;
      const int nslices = (xb + kXSliceBytes - 1) / kXSliceBytes;
      const int xslice16 = xb / nslices / 16;
      const int ylen = m * sh.n;
      const int grids[5] = {(sms + 3) / 4, (sms + 1) / 2, sms, 2 * sms, 4 * sms};
      float t[2][5];
      for (int v = 0; v < 2; v++) {
        for (int b = 0; b < 5; b++) {
          const int grid = grids[b];
          t[v][b] = time_graph_us(st, [&](int) {
            cudaLaunchAttribute at;
            cudaLaunchConfig_t cfg = launch_config(st, grid, kThreads, true, at);
            if (v == 0) CK(cudaLaunchKernelEx(&cfg, floor_kernel<false>, (const uint4 *)x, xslice16, nslices, y, ylen));
            else CK(cudaLaunchKernelEx(&cfg, floor_kernel<true>, (const uint4 *)x, xslice16, nslices, y, ylen));
          }, R);
        }
      }
      const float e = *std::min_element(t[0], t[0] + 5);
      const float xy = *std::min_element(t[1], t[1] + 5);
      const double mma_us = 2.0 * sh.n * sh.k * 8 * ((m + 7) / 8) / kDenseBF16 * 1e6;
      printf("| %s | %d | %.2f MB | %.2f us | %.2f | %.2f / %.2f / %.2f / %.2f / %.2f | %.0f %% | %.2f us |\n", sh.name, m,
             bytes / 1e6, t75, e, t[1][0], t[1][1], t[1][2], t[1][3], t[1][4], 100.0 * xy / t75, mma_us);
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
