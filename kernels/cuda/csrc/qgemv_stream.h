// qgemv_stream.h: private declarations between qgemm.cu (launch_gemv) and qgemv_stream.cu
// (the PDL-overlapped streaming decode GEMV). Not part of the Go ABI (dsv4cuda.h).
#ifndef DSV4CUDA_QGEMV_STREAM_H
#define DSV4CUDA_QGEMV_STREAM_H

#include <cuda_runtime.h>

// y[M][N] = alpha * x[M][K] . W^T (y += when accumulate) for one packed weight, M <= 16,
// x rows of exactly K bf16 and y rows of exactly N float32 (the decode GEMV contract of
// dsv4c_qgemm_cfg with ldx == K, ldy == N); with G > 1 the grouped MoE form of
// dsv4c_qgemm_grouped (group z: expert ids[z], or z when d_ids is NULL, of E weights
// wstride / sstride bytes apart, alpha * d_alphas[e] when d_alphas is non-NULL, x and y
// slices z). Returns 0, a cudaError_t, DSV4C_ERR_FORMAT, or DSV4C_ERR_SHAPE when it declines
// the shape (bad arguments, x too large for its shared memory, fewer blocks than half the
// SMs): the caller then uses the older decode kernels. accumulate: bit 0 y += ..., bit
// DSV4C_IDS_READY (grouped launches with ids) the ids are read before the wait (dsv4cuda.h),
// bit DSV4C_X_SWIGLU (grouped, G > 1) d_x is float32 [2][G][M][K] gate / up rows whose SwiGLU
// (clamp limit) the kernel stages as x (dsv4c_qgemm_grouped_swiglu); declined outside the
// balanced layout.
#define DSV4C_X_SWIGLU 4
// bit DSV4C_W13_PAIRS (G even): groups z < G/2 are the w1 of slot z and groups G/2 + z its w3,
// both with x slice z and expert ids[z] (G/2 ids, each in [0, E)), w3 of expert e at stack
// index E + e (E is per half; dsv4c_moe's w1 / w3 stack); y slices z as usual, i.e. the gate / up
// layout [2][G/2][M][N] that DSV4C_X_SWIGLU reads. Declined outside the balanced layout.
#define DSV4C_W13_PAIRS 8
// bit DSV4C_W13_ROWS (FP4, y = not +=; d_h): G groups (slots), each of a w1 / w3 stack as for
// DSV4C_W13_PAIRS (w3 of expert e at E + e), whose blocks each stream the same rows of w1 and
// w3 and write d_h (bf16 [G][M][N], the clamped SwiGLU) from shared memory; y is not written.
// Declined outside the balanced layout and when those rows do not fit in shared memory.
#define DSV4C_W13_ROWS 32
int dsv4c_qgemv_stream(int fmt, const void *d_w, const void *d_scales, long long wstride,
                       long long sstride, int N, int npad, int K, float alpha,
                       const float *d_alphas, const int *d_ids, const void *d_x, float *d_y,
                       int M, int G, int E, int accumulate, float limit, void *d_h,
                       cudaStream_t st);

// Whether the dispatch tries the streaming kernel for format fmt: 0 with DSV4GO_GEMV3=0 (the
// switch back to the earlier decode kernels); for grouped launches (grouped != 0) 1 unless
// DSV4GO_GEMV3_GROUPED=0 (the earlier split-K kernel for them).
int dsv4c_qgemv_stream_enabled(int fmt, int grouped);

// Records the decode kernel family that launch_gemv used last (a DSV4C_GEMV_* value of
// dsv4cuda.h) for dsv4c_gemv_path; qgemv_stream.cu records its own.
void dsv4c_gemv_path_set(int p);

#endif
