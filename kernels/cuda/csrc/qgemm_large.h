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
// The call may take two stream-ordered scratch buffers from a per-device memory pool and return
// them at its end in stream order (the pool keeps the memory it has held for later calls): for
// shapes that reuse x enough, ceil(M / 128) * 128 * K * 2 bytes (x in the kernel's tile
// layout); when K is split (grids with fewer tiles than SMs), 128 KB per split of each 256 x 128
// tile of y (the partial tiles, summed in split order by a second kernel). While st is being
// captured into a CUDA graph both are graph allocation nodes; with DSV4GO_QGEMM_XPERM_GRAPH=0 a
// captured call uses neither (x staged by the kernel itself, split-K reduced in a cluster or
// with atomics).
int dsv4c_qgemm_large(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                      float alpha, const void *d_x, int ldx, float *d_y, int ldy, int M,
                      int accumulate, int splits, cudaStream_t st);

#endif
