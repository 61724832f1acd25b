// tools/cuda_large_bufs.h: the buffers of one large-M call that tools/cuda_large_parts.cu and
// tools/cuda_large_trace.cu time: rotating copies of one packed weight matrix (about 240 MB in
// all, so that a chain of calls reads each copy from HBM, not L2) and its scales, filled with
// fixed bytes (the timing does not depend on the values), x [M][K] bf16 and y [M][N] float32.
// Include after qgemm_large.cu (DSV4C_FMT_*) and cuda_check.h (CK). Not part of the library.
#ifndef DSV4GO_TOOLS_CUDA_LARGE_BUFS_H
#define DSV4GO_TOOLS_CUDA_LARGE_BUFS_H

#include <cuda_bf16.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

struct LargeBufs {
  int npad = 0, copies = 0;
  std::vector<uint8_t *> w, s; // packed weights and scales, one per copy
  __nv_bfloat16 *x = nullptr;
  float *y = nullptr;

  // LargeBufs allocates the buffers of an N x K matrix in format fmt and M tokens (exits on a
  // CUDA error).
  LargeBufs(int fmt, int N, int K, int M) {
    npad = (N + 63) / 64 * 64;
    const size_t wbytes = fmt == DSV4C_FMT_FP8B ? (size_t)npad * K : (size_t)npad * K / 2;
    const size_t sbytes = fmt == DSV4C_FMT_NVFP4 ? (size_t)npad * K / 16
                          : fmt == DSV4C_FMT_MXFP4 ? (size_t)npad * K / 32
                                                   : (size_t)(npad / 128 + 1) * (K / 128);
    copies = std::max(2, (int)((240u << 20) / (wbytes + sbytes)) + 1);
    w.resize(copies);
    s.resize(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c], wbytes));
      CK(cudaMalloc(&s[c], sbytes + 16));
      CK(cudaMemset(w[c], 0x35, wbytes));
      CK(cudaMemset(s[c], 0x30, sbytes + 16));
    }
    CK(cudaMalloc(&x, (size_t)M * K * 2));
    CK(cudaMemset(x, 0x3c, (size_t)M * K * 2));
    CK(cudaMalloc(&y, (size_t)M * N * 4));
  }
  ~LargeBufs() {
    for (int c = 0; c < copies; c++) {
      cudaFree(w[c]);
      cudaFree(s[c]);
    }
    cudaFree(x);
    cudaFree(y);
  }
  LargeBufs(const LargeBufs &) = delete;
  LargeBufs &operator=(const LargeBufs &) = delete;
};

#endif
