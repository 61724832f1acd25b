// qgemm_large.cu: large-M weight-only quantized GEMM on Hopper tensor cores (wgmma, sm_90a).
//
// Same contract as dsv4c_qgemm (qgemm.cu): y[M][N] = alpha * x[M][K] (bf16) . W[N][K]^T with W
// packed by kernels/cuda/pack.go (NVFP4, MXFP4 or FP8-block tiles). This file is built for
// sm_90a only (Makefile); dispatch in qgemm.cu calls it for M > 64 when the device has compute
// capability 9.0 (dsv4c_qgemm_large_ok), the mma.sync kernels otherwise.
//
// Design. The weights are the M side of wgmma.mma_async m64n128k16 with the A operand in
// registers: for bf16, each warp of the warpgroup holds a 16 x 16 slice of A laid out like
// the A fragment of mma.sync m16n8k16, which is what the packed tiles were made for, so the
// exact in-register dequantization (decode_a, qgemm_common.cuh) produces A straight from the
// packed words. The tokens are B, read by the tensor cores from shared memory through a
// matrix descriptor (K-major, 128-byte swizzle: a token's 64 inputs of a tile are one 128-byte
// row, its 16-byte chunk ch stored at ch ^ (token % 8)).
//
// The packing permutes K inside each 64-input tile (pack.go, fragCoord): lane (g, t) holds, for
// k16 step j, inputs 16t + 4j + {0,1} (A registers 0, 1) and 16t + 4j + {2,3} (registers 2,
// 3). The B rows must follow the same order: logical k-pair t + 4*hi (hi = 0, 1) of step j is
// x's input pair 8t + 2j + hi. x is therefore copied into shared memory with 4-byte cp.async,
// one input pair per lane, each to its permuted place (below); the copies are asynchronous
// like the weights', so the pipeline needs no registers for staging.
//
// Block: 2 warpgroups (8 warps), 256 weight rows x 128 tokens. Warpgroup wg owns two 64-row
// blocks (row tiles mb*8 + warp, mb = 0, 1), i.e. two accumulators of 64 floats per thread;
// x is read from L2 once per 256 rows (a 128-row block made the kernel bound by x traffic).
// K streams in 128-input chunks through a 3-4 stage cp.async ring (x tiles, packed weights and
// scales of one chunk per stage). Per 64-input tile and row block, a warpgroup waits for the
// wgmma group that last used its A registers (wait_group 1: the newest group stays queued on
// the tensor cores), decodes 4 k16 steps of A, issues 4 wgmma and commits. Split-K over
// blockIdx.z (float32 atomics into y, zeroed first) when the grid is smaller than one wave.
// Measured on the H200: BENCHMARKS.md, "Large-M GEMM (wgmma)".
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "dsv4cuda.h"
#include "qgemm_common.cuh"
#include "qgemm_large.h"

namespace {

// ---- asynchronous copies and wgmma (decode_a, Fmt, cp_async16, cp_commit, cp_wait:
// qgemm_common.cuh) ----

// generic-proxy shared-memory writes (cp.async, stores) -> visible to the tensor cores
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor (K-major): start address, LBO (bytes between core matrices
// along K; unused with swizzling), SBO (bytes between 8-row groups), swizzle mode in bits
// 62-63 (0 none, 1 = 128-byte).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo,
                                              uint32_t swz) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | ((uint64_t)swz << 62);
}

// acc (+)= A (registers, 64 x 16 bf16) . B (shared memory, 128 tokens x 16, descriptor)
__device__ __forceinline__ void wgmma_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
               "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1)
               : "memory");
}

constexpr int LG_THREADS = 256; // 2 warpgroups

// ---- the kernel ----
//
// x staging: warp w copies the 64-input rows of tokens 16w .. 16w+15 of each tile, one token
// per instruction; lane l copies input pair l = 8t + 2j + hi (t = l/8, j = l/2 % 4, hi = l % 2),
// which is word t of chunk 2j + hi of the token's 128-byte row (before the swizzle): 128
// contiguous global bytes and 32 distinct banks per instruction. A ring stage holds one
// 128-input chunk: its two x tiles (1024-byte aligned), the packed weights and the scales.
// mode: 0 = store y, 1 = y += (accumulate, one split), 2 = float32 atomicAdd (split-K).
template <int FMT> struct LgSmem {
  static constexpr int WQ = Fmt<FMT>::WQ;
  static constexpr int ROWT = 16;
  static constexpr int XT = 128 * 128;          // one 64-input x tile (128 tokens)
  static constexpr int W = ROWT * 2 * 512 * WQ; // packed weights per chunk
  static constexpr int S = FMT == DSV4C_FMT_NVFP4 ? ROWT * 128 : FMT == DSV4C_FMT_MXFP4 ? ROWT * 64 : 0;
  static constexpr int STAGE = (2 * XT + W + S + 1023) / 1024 * 1024;
  static constexpr int WS = FMT == DSV4C_FMT_FP8B ? 3 : 4; // ring depth (<= 200 KB)
  static constexpr int TOTAL = WS * STAGE + 1024;
};

__device__ __forceinline__ void cp_async4(uint32_t smem, const void *gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(valid ? 4 : 0));
}

template <int FMT>
__global__ void __launch_bounds__(LG_THREADS, 1)
    qgemm_wgmma_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles,
                       int K, float alpha, const __nv_bfloat16 *__restrict__ x, int ldx,
                       float *__restrict__ y, int ldy, int M, int N, int kper, int mode) {
  using L = LgSmem<FMT>;
  constexpr int WQ = L::WQ, ROWT = L::ROWT, WS = L::WS, TN = 128;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int brt0 = blockIdx.x * ROWT;
  const int tok0 = blockIdx.y * TN;
  const int KT = K / 64;
  const int c0 = blockIdx.z * kper;
  const int nch = min(K / 128 - c0, kper);

  // this lane's x word: input pair l of a token's tile row -> byte offset in the token's row
  const int xj = (lane >> 1) & 3, xhi = lane & 1, xt = lane >> 3;
  const int xch = 2 * xj + xhi;
  auto issue = [&](int cc) {
    const int slot = cc % WS;
    uint8_t *st = smem + slot * L::STAGE;
    const int kt0 = (c0 + cc) * 2;
#pragma unroll
    for (int u0 = 0; u0 < ROWT * 64 * WQ; u0 += LG_THREADS) {
      const int u = u0 + tid;
      const int r = u / (64 * WQ), rem = u - r * (64 * WQ);
      const int rt = min(brt0 + r, ntiles - 1);
      cp_async16(st + 2 * L::XT + (size_t)u * 16, w + ((size_t)rt * KT + kt0) * (32 * WQ) + rem, true);
    }
    if (FMT != DSV4C_FMT_FP8B) {
      constexpr int SU = L::S / 16 / ROWT > 0 ? L::S / 16 / ROWT : 1;
      if (tid < ROWT * SU) {
        const int r = tid / SU, rem = tid - r * SU;
        const int rt = min(brt0 + r, ntiles - 1);
        cp_async16(st + 2 * L::XT + L::W + (size_t)tid * 16,
                   sc + ((size_t)rt * KT + kt0) / 2 * (SU * 16) + rem * 16, true);
      }
    }
    const uint32_t xs = s0 + slot * L::STAGE + xt * 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int k0 = (kt0 + h) * 64 + 2 * lane;
#pragma unroll
      for (int m = 0; m < 16; m++) {
        const int n = warp * 16 + m;
        const bool ok = tok0 + n < M;
        const __nv_bfloat16 *src = x + (ok ? (size_t)(tok0 + n) * ldx + k0 : 0);
        cp_async4(xs + h * L::XT + n * 128 + ((xch ^ (m & 7)) << 4), src, ok);
      }
    }
  };

  auto decode_tile = [&](uint32_t (&A)[4][4], int cc, int h, int mb) {
    const int rl = mb * 8 + warp;
    const uint8_t *st = smem + (cc % WS) * L::STAGE + 2 * L::XT;
    uint4 wv[WQ];
#pragma unroll
    for (int i = 0; i < WQ; i++)
      wv[i] = *reinterpret_cast<const uint4 *>(st + (((rl * 2 + h) * 32 + lane) * WQ + i) * 16);
    uint32_t sw;
    if (FMT == DSV4C_FMT_NVFP4)
      sw = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 128 + lane * 4);
    else if (FMT == DSV4C_FMT_MXFP4)
      sw = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 64 + g * 8 + (t >> 1) * 4);
    else
      sw = __ldg(sc + (size_t)min((brt0 >> 3) + mb, (ntiles - 1) >> 3) * (KT / 2) + c0 + cc);
#pragma unroll
    for (int j = 0; j < 4; j++) decode_a<FMT>(wv, sw, h, j, A[j]);
  };

  float acc[2][TN / 2];
#pragma unroll
  for (int mb = 0; mb < 2; mb++)
#pragma unroll
    for (int i = 0; i < TN / 2; i++) acc[mb][i] = 0.f;
  uint32_t A[2][4][4] = {};

#pragma unroll
  for (int s = 0; s < WS - 1; s++) {
    if (s < nch) issue(s);
    cp_commit();
  }

  auto tile = [&](int c, int h) {
    const uint32_t xb = s0 + (c % WS) * L::STAGE + h * L::XT;
#pragma unroll
    for (int mb = 0; mb < 2; mb++) {
      wg_wait<1>(); // the group that last read A[mb] (previous tile, same row block) is done
      decode_tile(A[mb], c, h, mb);
      wg_fence();
#pragma unroll
      for (int j = 0; j < 4; j++) wgmma_n128(acc[mb], A[mb][j], smem_desc(xb + j * 32, 16, 1024, 1));
      wg_commit();
    }
  };
  for (int c = 0; c < nch; c++) {
    cp_wait<WS - 2>(); // chunk c has landed (this thread's copies)
    fence_async_smem(); // generic-proxy writes -> visible to the tensor cores
    __syncthreads();
    tile(c, 0);
    // Both warpgroups have now waited for every group of chunk c-1: its slot can be refilled.
    __syncthreads();
    if (c + WS - 1 < nch) issue(c + WS - 1);
    cp_commit();
    tile(c, 1);
  }
  wg_wait<0>();

#pragma unroll
  for (int mb = 0; mb < 2; mb++) {
    const int row0 = (brt0 + mb * 8 + warp) * 16 + g;
#pragma unroll
    for (int b = 0; b < TN / 8; b++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = row0 + 8 * (e >> 1);
        const int tok = tok0 + 8 * b + 2 * t + (e & 1);
        if (row < N && tok < M) {
          const float v = acc[mb][4 * b + e] * alpha;
          float *dst = y + (size_t)tok * ldy + row;
          if (mode == 2)
            atomicAdd(dst, v);
          else if (mode == 1)
            *dst += v;
          else
            *dst = v;
        }
      }
    }
  }
}

// Split-K factor and epilogue mode for a grid of rb x tb blocks over K (one block per SM:
// split K only while the grid stays within one wave, at least two 128-input chunks per
// split); zeroes y when the splits accumulate with atomics. Returns 0 or an error code.
static int plan(int rb, int tb, int K, int M, int N, int ldy, float *y, int accumulate,
                int &splits, int &per, int &mode, cudaStream_t st) {
  const int kch = K / 128;
  if (splits <= 0) {
    const int sms = device_sms();
    const int blocks = rb * tb;
    splits = blocks >= sms ? 1 : sms / blocks;
    splits = min(splits, max(1, kch / 2));
  }
  splits = max(1, min(splits, kch));
  per = (kch + splits - 1) / splits;
  splits = (kch + per - 1) / per;
  if (splits > 65535 || tb > 65535) return DSV4C_ERR_SHAPE;
  mode = accumulate ? 1 : 0;
  if (splits > 1) {
    mode = 2;
    if (!accumulate) {
      cudaError_t e = ldy == N ? cudaMemsetAsync(y, 0, (size_t)M * N * sizeof(float), st)
                               : cudaMemset2DAsync(y, (size_t)ldy * sizeof(float), 0,
                                                   (size_t)N * sizeof(float), M, st);
      if (e != cudaSuccess) return (int)e;
    }
  }
  return 0;
}

template <int FMT>
int launch_wgmma(const void *w, const void *sc, int N, int npad, int K, float alpha,
                 const void *x, int ldx, float *y, int ldy, int M, int accumulate, int splits,
                 cudaStream_t st) {
  using L = LgSmem<FMT>;
  const int ntiles = npad / 16;
  const int rb = (ntiles + L::ROWT - 1) / L::ROWT, tb = (M + 127) / 128;
  int per = 0, mode = 0;
  if (int e = plan(rb, tb, K, M, N, ldy, y, accumulate, splits, per, mode, st)) return e;
  static DeviceOnce smemOptIn; // per instantiation and device
  if (int e = opt_in_smem(smemOptIn, qgemm_wgmma_kernel<FMT>, L::TOTAL)) return e;
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  dim3 grid(rb, tb, splits);
  qgemm_wgmma_kernel<FMT><<<grid, LG_THREADS, L::TOTAL, st>>>(
      (const uint4 *)w, (const uint8_t *)sc, ntiles, K, alpha, (const __nv_bfloat16 *)x, ldx, y,
      ldy, M, N, per, mode);
  return (int)cudaGetLastError();
}

} // namespace

int dsv4c_qgemm_large_ok() {
  static const int off = env_int("DSV4GO_QGEMM_WGMMA", 1) == 0;
  if (off) return 0;
  static int cc[64]; // per device ordinal: 0 = unknown, 1 = sm_90, 2 = other
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 0;
  if (dev >= 64) return 0;
  if (cc[dev] == 0) {
    int maj = 0, min = 0;
    cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev);
    cc[dev] = (maj == 9 && min == 0) ? 1 : 2;
  }
  return cc[dev] == 1;
}

int dsv4c_qgemm_large(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                      float alpha, const void *d_x, int ldx, float *d_y, int ldy, int M,
                      int accumulate, int splits, cudaStream_t st) {
  if (N <= 0 || M <= 0 || K <= 0 || K % 128 != 0 || npad % 64 != 0 || npad < N || ldx < K ||
      ldx % 8 != 0 || ldy < N || ((uintptr_t)d_x & 15) != 0)
    return DSV4C_ERR_SHAPE;
  switch (fmt) {
  case DSV4C_FMT_NVFP4:
    return launch_wgmma<DSV4C_FMT_NVFP4>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M, accumulate, splits, st);
  case DSV4C_FMT_MXFP4:
    return launch_wgmma<DSV4C_FMT_MXFP4>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M, accumulate, splits, st);
  case DSV4C_FMT_FP8B:
    return launch_wgmma<DSV4C_FMT_FP8B>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M, accumulate, splits, st);
  }
  return DSV4C_ERR_FORMAT;
}
