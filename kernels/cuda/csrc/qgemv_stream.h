// qgemv_stream.h: private declarations between qgemm.cu (launch_gemv) and qgemv_stream.cu
// (the PDL-overlapped streaming decode GEMV). Not part of the Go ABI (dsv4cuda.h).
#ifndef DSV4CUDA_QGEMV_STREAM_H
#define DSV4CUDA_QGEMV_STREAM_H

#include <cuda_runtime.h>

// y[M][N] = alpha * x[M][K] . W^T (y += when accumulate) for one packed weight, M <= 16,
// x rows of exactly K bf16 and y rows of exactly N float32 (the decode GEMV contract of
// dsv4c_qgemm_cfg with ldx == K, ldy == N). Returns 0, a cudaError_t, DSV4C_ERR_FORMAT, or
// DSV4C_ERR_SHAPE when it declines the shape (bad arguments, x too large for its shared
// memory, fewer row tiles than half the SMs): the caller then uses the older decode kernels.
int dsv4c_qgemv_stream(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                       float alpha, const void *d_x, float *d_y, int M, int accumulate,
                       cudaStream_t st);

// 1 unless DSV4GO_GEMV3=0 (the environment switch back to the earlier decode kernels).
int dsv4c_qgemv_stream_enabled();

#endif
