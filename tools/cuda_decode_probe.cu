// tools/cuda_decode_probe.cu: how fast can an sm_90 SM turn packed FP4 words into MMA input?
//
// The decode GEMV is bound by the E2M1 -> 16-bit float arithmetic on Hopper (no FP4 conversion
// instruction; BENCHMARKS.md "CUDA (H200)"). This probe times the arithmetic alone, with no
// memory traffic: every thread decodes words held in registers and feeds mma.sync m16n8k16,
// with 8 independent words per loop step, on a grid of 2 x 8 warps per SM (the decode GEMV's
// occupancy) and 4 x 8. Variants:
//   bf16-bits: the kernels' decode (qgemm_common.cuh dec_e2m1: shifts and masks into bf16 with
//              exponent 2^-126, then the block scale multiplies in bf16), bf16 MMA;
//   f16-cvt:   E2M1 nibbles placed in E4M3 bytes (s00 e1e0m 00, value e2m1 * 2^-6), converted by
//              the FP8 conversion instruction cvt.rn.f16x2.e4m3x2, scale multiply in f16, f16 MMA
//              (x would be staged in f16);
//   mma-only:  no decode (the word itself is the A operand): the cost of the multiply + MMA;
//   bf16-rot:  the previous packing's decode (five funnel shifts on the ALU pipe), bf16 MMA.
// Output: decoded words (8 values) per ns on the whole GPU, and the NVFP4 stream rate that
// would keep up (4.5 bytes per word: 4 of E2M1, 0.5 of E4M3 scales).
// Build: make cuda-bins (out/cuda/decode_probe), or
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels/cuda/csrc -o decode_probe tools/cuda_decode_probe.cu
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "qgemm_common.cuh" // the kernels' bmul, dec_e2m1 and mma16816 (bf16)

namespace {

__device__ __forceinline__ uint32_t hmul(uint32_t a, uint32_t b) {
  __half2 r = __hmul2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
  return *reinterpret_cast<uint32_t *>(&r);
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// the previous packing's decode (until 2026-11-30): five funnel shifts and six LOP3, all on the
// integer ALU pipe (half rate on sm_90), for comparison with dec_e2m1's IMAD shifts.
__device__ __forceinline__ uint32_t rotr(uint32_t v, int s) { return __funnelshift_r(v, v, s); }
__device__ __forceinline__ void dec_rot(uint32_t q, uint32_t (&a)[4]) {
  const uint32_t M = 0x81C081C0u, MAG = 0x01C001C0u, SG = 0x80008000u;
  a[0] = q & M;
  a[1] = rotr(q, 3) & M;
  a[2] = (rotr(q, 6) & MAG) | (rotr(q, 1) & SG);
  a[3] = (rotr(q, 13) & MAG) | (rotr(q, 2) & SG);
}

__device__ __forceinline__ uint32_t cvt_e4m3x2(uint32_t v, bool hi) {
  uint32_t d;
  if (hi)
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %1;\n cvt.rn.f16x2.e4m3x2 %0, h;\n}" : "=r"(d) : "r"(v));
  else
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %1;\n cvt.rn.f16x2.e4m3x2 %0, l;\n}" : "=r"(d) : "r"(v));
  return d;
}

// E2M1 in E4M3 bytes: r0 takes the nibbles stored at bits {7, 4:2} of each byte, r1 the ones
// at {5, 6, 1:0} (sign 5, e1 6, e0 1, m 0), moved into place by two shifts.
__device__ __forceinline__ void dec_cvt(uint32_t q, uint32_t (&a)[4]) {
  const uint32_t r0 = q & 0x9C9C9C9Cu;
  const uint32_t r1 = ((q << 2) & 0x8C8C8C8Cu) | ((q >> 2) & 0x10101010u);
  a[0] = cvt_e4m3x2(r0, false);
  a[1] = cvt_e4m3x2(r0, true);
  a[2] = cvt_e4m3x2(r1, false);
  a[3] = cvt_e4m3x2(r1, true);
}

template <int V>
__global__ void __launch_bounds__(256) probe(uint32_t seed, int iters, float *out) {
  uint32_t q = seed ^ (threadIdx.x * 0x9E3779B9u) ^ blockIdx.x;
  const uint32_t S = 0x3F803F80u ^ (seed & 0x00010001u), b0 = q | 0x3C003C00u, b1 = b0 ^ 0x1000u;
  float acc[4][4] = {};
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int w = 0; w < 8; w++) {
      const uint32_t qw = q + w * 0x01010101u;
      uint32_t a[4];
      if (V == 0) {
        dec_e2m1(qw, a);
#pragma unroll
        for (int k = 0; k < 4; k++) a[k] = bmul(a[k], S);
        mma16816(acc[w & 3], a, b0, b1);
      } else if (V == 1) {
        dec_cvt(qw, a);
#pragma unroll
        for (int k = 0; k < 4; k++) a[k] = hmul(a[k], S);
        mma_f16(acc[w & 3], a, b0, b1);
      } else if (V == 3) {
        dec_rot(qw, a);
#pragma unroll
        for (int k = 0; k < 4; k++) a[k] = bmul(a[k], S);
        mma16816(acc[w & 3], a, b0, b1);
      } else {
#pragma unroll
        for (int k = 0; k < 4; k++) a[k] = bmul(qw ^ k, S);
        mma16816(acc[w & 3], a, b0, b1);
      }
    }
    q = q * 1664525u + 1013904223u;
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 4; j++)
#pragma unroll
    for (int k = 0; k < 4; k++) s += acc[j][k];
  if (s == 1.2345f) out[blockIdx.x * blockDim.x + threadIdx.x] = s; // never true: keeps the work
}

template <int V> double run(int sms, int bps, int iters, float *out) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  probe<V><<<sms * bps, 256>>>(1u, 16, out); // warm-up
  cudaEventRecord(e0);
  probe<V><<<sms * bps, 256>>>(1u, iters, out);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  const double words = (double)sms * bps * 256 * iters * 8;
  return words / (ms * 1e6); // words per ns
}

} // namespace

int main() {
  int sms = 0, clk = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  float *out;
  cudaMalloc(&out, 64 << 20);
  printf("SMs %d, max SM clock %.0f MHz\n", sms, clk / 1e3);
  printf("| variant | warps/SM | words/ns (GPU) | NVFP4 GB/s it keeps up with |\n|---|---|---|---|\n");
  const char *names[4] = {"bf16-bits (kernels' decode)", "f16-cvt (E4M3 conversion)", "mma-only (no decode)",
                          "bf16-rot (previous packing's decode)"};
  for (int bps = 2; bps <= 4; bps += 2) {
    double r[4] = {run<0>(sms, bps, 4096, out), run<1>(sms, bps, 4096, out), run<2>(sms, bps, 4096, out),
                   run<3>(sms, bps, 4096, out)};
    for (int v = 0; v < 4; v++) printf("| %s | %d | %.1f | %.0f |\n", names[v], bps * 8, r[v], r[v] * 4.5);
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
