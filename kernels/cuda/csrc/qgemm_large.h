// qgemm_large.h: private declarations between qgemm.cu (dispatch) and qgemm_large.cu (the
// Hopper wgmma GEMM for large M, built for sm_90a only). Not part of the Go ABI (dsv4cuda.h).
#ifndef DSV4CUDA_QGEMM_LARGE_H
#define DSV4CUDA_QGEMM_LARGE_H

#include <cuda_runtime.h>

// 1 when the current device can run the wgmma kernels (compute capability 9.0) and
// DSV4GO_QGEMM_WGMMA is not "0"; else 0.
int dsv4c_qgemm_large_ok();

// y[M][N] = alpha * x[M][K] . W^T (or y += when accumulate), the contract of dsv4c_qgemm_cfg;
// splits > 0 forces the split-K factor, 0 chooses it. Call only when dsv4c_qgemm_large_ok().
// For shapes that reuse x enough, the call takes a stream-ordered scratch buffer of
// ceil(M / 128) * 128 * K * 2 bytes (x in the kernel's tile layout) from a per-device memory
// pool and returns it at the end of the call in stream order; the pool keeps the memory it has
// held for later calls. While st is being captured into a CUDA graph the pre-pass is skipped
// (the kernel stages x itself).
int dsv4c_qgemm_large(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                      float alpha, const void *d_x, int ldx, float *d_y, int ldy, int M,
                      int accumulate, int splits, cudaStream_t st);

#endif
