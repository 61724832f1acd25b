// qgemm.cu: weight-only quantized GEMM/GEMV for Hopper (sm_90) and newer.
//
// y[M][N] = alpha * x[M][K] (bf16) . W[N][K]^T with W stored as NVFP4, MXFP4 or FP8-block in
// the tile layout of kernels/cuda/pack.go. Weights are the A operand of mma.sync m16n8k16
// (16 weight rows x 16 K), tokens are the B operand (8 tokens per n8 tile), so one kernel
// serves M = 1 (one n8 tile, memory-bound) up to large M (64-token chunks, MMA-bound).
//
// Dequantization happens in registers, exactly, into bf16:
//  - E2M1: each 32-bit word holds the 8 nibbles of one lane's A fragment for one k16 step,
//    laid out so that rotations and masks put sign/exponent/mantissa bits straight into
//    bf16 positions as the bf16 number e2m1 * 2^-126 (a bf16 subnormal for 0.5).
//  - E4M3: the byte's magnitude bits go to bf16 bits 4..10, the sign to 15: e4m3 * 2^-120.
//  Multiplying by the block scale as a bf16 pair S (built from an 8-bit code with one
//  integer multiply-add) rescales to a normal number; products have <= 6 significant bits,
//  so the bf16 result is exact. The remaining power of two (and NVFP4's F32 global scale)
//  is alpha, applied to the float32 accumulators.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "dsv4cuda.h"

namespace {

constexpr int KC = 128;      // K per staged chunk
constexpr int XPAD = KC + 8; // padded smem row, in bf16 elements (272 bytes)

__device__ __forceinline__ uint32_t rotr(uint32_t v, int s) { return __funnelshift_r(v, v, s); }

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

__device__ __forceinline__ uint32_t bmul(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&a),
                             *reinterpret_cast<__nv_bfloat162 *>(&b));
  return *reinterpret_cast<uint32_t *>(&r);
}

// broadcast scale code byte i of w into a bf16 pair: code*smul + sadd in each half.
template <int SMUL, int SADD>
__device__ __forceinline__ uint32_t scale_pair(uint32_t w, int i) {
  uint32_t x = prmt(w, 0u, 0x4040u | (uint32_t)i | ((uint32_t)i << 8));
  return x * (uint32_t)SMUL + (uint32_t)SADD * 0x10001u;
}

// E2M1 word -> 4 bf16x2 registers (a0a1, a2a3, a4a5, a6a7), each e2m1 * 2^-126.
__device__ __forceinline__ void dec_e2m1(uint32_t q, uint32_t (&a)[4]) {
  const uint32_t M = 0x81C081C0u, MAG = 0x01C001C0u, SG = 0x80008000u;
  a[0] = q & M;
  a[1] = rotr(q, 3) & M;
  a[2] = (rotr(q, 6) & MAG) | (rotr(q, 1) & SG);
  a[3] = (rotr(q, 13) & MAG) | (rotr(q, 2) & SG);
}

// two E4M3 bytes (byte i and i+1 of w) -> bf16x2 of e4m3 * 2^-120.
__device__ __forceinline__ uint32_t dec_e4m3(uint32_t w, int i) {
  uint32_t x = prmt(w, 0u, 0x4040u | (uint32_t)i | ((uint32_t)(i + 1) << 8));
  return ((x << 4) & 0x07F007F0u) | ((x << 8) & 0x80008000u);
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p) {
  uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint4 ldg_stream(const uint4 *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ uint32_t comp(const uint4 &v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Per-format constants: uint4 per lane per 64-K tile (WQ), scale words per lane per tile (SW).
template <int FMT> struct Fmt;
template <> struct Fmt<DSV4C_FMT_NVFP4> {
  static constexpr int WQ = 1, SW = 2, SMUL = 16, SADD = 0x7680;
};
template <> struct Fmt<DSV4C_FMT_MXFP4> {
  static constexpr int WQ = 1, SW = 1, SMUL = 128, SADD = 0;
};
template <> struct Fmt<DSV4C_FMT_FP8B> {
  static constexpr int WQ = 2, SW = 1, SMUL = 128, SADD = 0;
};

template <int FMT, int RT> struct Regs {
  uint4 w[RT][2 * Fmt<FMT>::WQ];
  uint32_t s[RT][2 * Fmt<FMT>::SW];
};

template <int FMT, int RT>
__device__ __forceinline__ void load_chunk(Regs<FMT, RT> &R, const uint4 *__restrict__ w,
                                           const uint8_t *__restrict__ sc, int rt0, int ntiles,
                                           int KT, int kt0, int lane) {
  constexpr int WQ = Fmt<FMT>::WQ;
  const int g = lane >> 2;
#pragma unroll
  for (int r = 0; r < RT; r++) {
    int rt = rt0 + r;
    if (rt >= ntiles) rt = ntiles - 1; // idle rows read a valid tile; results are not stored
    size_t base = (size_t)rt * KT + kt0;
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
      for (int i = 0; i < WQ; i++)
        R.w[r][h * WQ + i] = ldg_stream(w + (base + h) * (32 * WQ) + lane * WQ + i);
      if (FMT == DSV4C_FMT_NVFP4) {
        uint2 v = __ldg(reinterpret_cast<const uint2 *>(sc + (base + h) * 64) + g);
        R.s[r][h * 2] = v.x;
        R.s[r][h * 2 + 1] = v.y;
      } else if (FMT == DSV4C_FMT_MXFP4) {
        R.s[r][h] = __ldg(reinterpret_cast<const uint32_t *>(sc + (base + h) * 32) + g);
      }
    }
    if (FMT == DSV4C_FMT_FP8B) {
      // one scale per (128-row block, 128-K block)
      R.s[r][0] = __ldg(sc + (size_t)(rt >> 3) * (KT / 2) + (kt0 >> 1));
      R.s[r][1] = 0;
    }
  }
}

template <int FMT, int MT, int RT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    qgemm_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles, int K,
                 float alpha, const __nv_bfloat16 *__restrict__ x, int ldx, float *__restrict__ y,
                 int ldy, int M, int N, int kchunk, int atomic) {
  constexpr int TOK = MT * 8;
  constexpr int SMUL = Fmt<FMT>::SMUL, SADD = Fmt<FMT>::SADD;
  __shared__ __align__(16) __nv_bfloat16 xs[2][TOK][XPAD];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int rt0 = (blockIdx.x * WARPS + warp) * RT;
  const int tok0 = blockIdx.z * TOK;
  const int kbeg = blockIdx.y * kchunk;
  const int kend = min(K, kbeg + kchunk);
  const int nch = (kend - kbeg) / KC;
  const int KT = K / 64;
  if (nch <= 0) return; // whole block: uniform

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; r++)
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[r][n][e] = 0.f;

  auto stage_x = [&](int c, int buf) {
    const int k0 = kbeg + c * KC;
    for (int i = threadIdx.x; i < TOK * (KC / 8); i += WARPS * 32) {
      int row = i / (KC / 8), seg = i % (KC / 8);
      int tok = tok0 + row;
      bool ok = tok < M;
      const __nv_bfloat16 *src = x + (size_t)(ok ? tok : 0) * ldx + k0 + seg * 8;
      cp_async16(&xs[buf][row][seg * 8], src, ok);
    }
    cp_commit();
  };

  Regs<FMT, RT> cur, nxt;
  stage_x(0, 0);
  load_chunk<FMT, RT>(cur, w, sc, rt0, ntiles, KT, kbeg / 64, lane);

  for (int c = 0; c < nch; c++) {
    const bool more = c + 1 < nch;
    if (more) {
      stage_x(c + 1, (c + 1) & 1);
      load_chunk<FMT, RT>(nxt, w, sc, rt0, ntiles, KT, (kbeg + (c + 1) * KC) / 64, lane);
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const int buf = c & 1;

    uint32_t bx[MT][4];
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
      // B fragments: one ldmatrix.x4 per n8 tile covers two k16 steps
      if ((kk & 1) == 0) {
#pragma unroll
        for (int n = 0; n < MT; n++)
          ldsm_x4(bx[n], &xs[buf][n * 8 + (lane & 7)][kk * 16 + (lane >> 3) * 8]);
      }
      const int bo = (kk & 1) * 2;
      const int h = kk >> 2, j = kk & 3;
#pragma unroll
      for (int r = 0; r < RT; r++) {
        uint32_t a[4];
        if (FMT == DSV4C_FMT_FP8B) {
          uint32_t S = scale_pair<SMUL, SADD>(cur.s[r][0], 0);
          uint32_t w0 = comp(cur.w[r][h * 2 + (j >> 1)], (j & 1) * 2);
          uint32_t w1 = comp(cur.w[r][h * 2 + (j >> 1)], (j & 1) * 2 + 1);
          a[0] = bmul(dec_e4m3(w0, 0), S);
          a[1] = bmul(dec_e4m3(w0, 2), S);
          a[2] = bmul(dec_e4m3(w1, 0), S);
          a[3] = bmul(dec_e4m3(w1, 2), S);
        } else {
          uint32_t q = comp(cur.w[r][h], j);
          uint32_t Sg, Sg8;
          if (FMT == DSV4C_FMT_NVFP4) {
            uint32_t sw = cur.s[r][h * 2 + (j >> 1)];
            Sg = scale_pair<SMUL, SADD>(sw, (j & 1) * 2);
            Sg8 = scale_pair<SMUL, SADD>(sw, (j & 1) * 2 + 1);
          } else {
            uint32_t sw = cur.s[r][h];
            Sg = scale_pair<SMUL, SADD>(sw, (j >> 1) * 2);
            Sg8 = scale_pair<SMUL, SADD>(sw, (j >> 1) * 2 + 1);
          }
          uint32_t d[4];
          dec_e2m1(q, d);
          a[0] = bmul(d[0], Sg);
          a[1] = bmul(d[1], Sg8);
          a[2] = bmul(d[2], Sg);
          a[3] = bmul(d[3], Sg8);
        }
#pragma unroll
        for (int n = 0; n < MT; n++) mma16816(acc[r][n], a, bx[n][bo], bx[n][bo + 1]);
      }
    }
    __syncthreads();
    if (more) cur = nxt;
  }

  // epilogue: c0 (row g, tok 2t), c1 (row g, tok 2t+1), c2 (row g+8, tok 2t), c3 (g+8, 2t+1)
#pragma unroll
  for (int r = 0; r < RT; r++) {
    const int rt = rt0 + r;
    if (rt >= ntiles) continue;
#pragma unroll
    for (int n = 0; n < MT; n++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = rt * 16 + g + ((e >> 1) << 3);
        const int tok = tok0 + n * 8 + 2 * t + (e & 1);
        if (row < N && tok < M) {
          float v = acc[r][n][e] * alpha;
          float *dst = y + (size_t)tok * ldy + row;
          if (atomic)
            atomicAdd(dst, v);
          else
            *dst = v;
        }
      }
    }
  }
}

template <int FMT, int MT, int RT, int WARPS>
int launch(const void *w, const void *sc, int N, int npad, int K, float alpha, const void *x,
           int ldx, float *y, int ldy, int M, int accumulate, int splits, cudaStream_t st) {
  const int ntiles = npad / 16;
  const int TOK = MT * 8;
  const int rowsPerBlock = WARPS * RT;
  dim3 grid((ntiles + rowsPerBlock - 1) / rowsPerBlock, 1, (M + TOK - 1) / TOK);
  const int kch = K / KC;
  if (splits <= 0) {
    int dev = 0, sms = 132;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    int blocks = grid.x * grid.z;
    int target = 2 * sms;
    splits = blocks >= target ? 1 : (target + blocks - 1) / blocks;
  }
  if (splits > kch) splits = kch;
  int per = (kch + splits - 1) / splits; // chunks per split
  splits = (kch + per - 1) / per;
  grid.y = splits;
  int atomic = accumulate || splits > 1;
  if (!accumulate && splits > 1) {
    if (ldy == N) {
      cudaError_t e = cudaMemsetAsync(y, 0, (size_t)M * N * sizeof(float), st);
      if (e != cudaSuccess) return (int)e;
    } else {
      cudaError_t e = cudaMemset2DAsync(y, (size_t)ldy * sizeof(float), 0, (size_t)N * sizeof(float), M, st);
      if (e != cudaSuccess) return (int)e;
    }
  }
  qgemm_kernel<FMT, MT, RT, WARPS><<<grid, WARPS * 32, 0, st>>>(
      (const uint4 *)w, (const uint8_t *)sc, ntiles, K, alpha, (const __nv_bfloat16 *)x, ldx, y,
      ldy, M, N, per * KC, atomic);
  return (int)cudaGetLastError();
}

template <int FMT>
int dispatch(const void *w, const void *sc, int N, int npad, int K, float alpha, const void *x,
             int ldx, float *y, int ldy, int M, int accumulate, int splits, cudaStream_t st) {
  if (M <= 8)
    return launch<FMT, 1, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  if (M <= 16)
    return launch<FMT, 2, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  if (M <= 32)
    return launch<FMT, 4, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  return launch<FMT, 8, 2, 8>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
}

} // namespace

extern "C" int dsv4c_qgemm_cfg(int fmt, const void *d_w, const void *d_scales, int N, int npad,
                               int K, float alpha, const void *d_x, int ldx, float *d_y, int ldy,
                               int M, int accumulate, int splits, void *stream) {
  if (N <= 0 || M <= 0 || K <= 0 || K % KC != 0 || npad % 64 != 0 || npad < N || ldx < K ||
      ldx % 8 != 0 || ldy < N || ((uintptr_t)d_x & 15) != 0)
    return DSV4C_ERR_SHAPE;
  cudaStream_t st = (cudaStream_t)stream;
  switch (fmt) {
  case DSV4C_FMT_NVFP4:
    return dispatch<DSV4C_FMT_NVFP4>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M,
                                     accumulate, splits, st);
  case DSV4C_FMT_MXFP4:
    return dispatch<DSV4C_FMT_MXFP4>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M,
                                     accumulate, splits, st);
  case DSV4C_FMT_FP8B:
    return dispatch<DSV4C_FMT_FP8B>(d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M,
                                    accumulate, splits, st);
  }
  return DSV4C_ERR_FORMAT;
}

extern "C" int dsv4c_qgemm(int fmt, const void *d_w, const void *d_scales, int N, int npad,
                           int K, float alpha, const void *d_x, int ldx, float *d_y, int ldy,
                           int M, int accumulate, void *stream) {
  return dsv4c_qgemm_cfg(fmt, d_w, d_scales, N, npad, K, alpha, d_x, ldx, d_y, ldy, M,
                         accumulate, 0, stream);
}
