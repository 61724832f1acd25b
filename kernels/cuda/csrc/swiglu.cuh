// swiglu.cuh: the clamped SwiGLU element, shared by ops.cu (dsv4c_swiglu) and the GEMV kernels
// that make w2's input themselves (qgemm_common.cuh: swiglu_bf16), so that both round the same
// float32 value. Private to kernels/cuda/csrc (not part of the Go ABI, dsv4cuda.h).
#ifndef DSV4CUDA_SWIGLU_CUH
#define DSV4CUDA_SWIGLU_CUH

#include <math.h>

namespace {

// swiglu_f32 is silu(min(g, limit)) * clamp(u, -limit, limit) in float32 (limit <= 0: no
// clamp): DeepSeek-V4's clamped SwiGLU, the CPU backend's kernels.SwiGLU (ops.go).
__device__ __forceinline__ float swiglu_f32(float g, float u, float limit) {
  if (limit > 0.f) {
    g = fminf(g, limit);
    u = fmaxf(fminf(u, limit), -limit);
  }
  return g / (1.f + expf(-g)) * u;
}

} // namespace

#endif
