// qgemm.cu: weight-only quantized GEMM/GEMV for Hopper (sm_90) and newer.
//
// y[M][N] = alpha * x[M][K] (bf16) . W[N][K]^T with W stored as NVFP4, MXFP4 or FP8-block in
// the tile layout of kernels/cuda/pack.go. Weights are the A operand of mma.sync m16n8k16
// (16 weight rows x 16 K), tokens are the B operand (8 tokens per n8 tile), so one kernel
// serves M = 1 (one n8 tile, memory-bound) up to large M (64-token chunks, MMA-bound).
//
// Dequantization happens in registers, exactly, into bf16:
//  - E2M1: each 32-bit word holds the 8 nibbles of one lane's A fragment for one k16 step,
//    laid out so that shifts and masks put sign/exponent/mantissa bits straight into
//    bf16 positions as the bf16 number e2m1 * 2^-126 (a bf16 subnormal for 0.5).
//  - E4M3: the byte's magnitude bits go to bf16 bits 4..10, the sign to 15: e4m3 * 2^-120.
//  Multiplying by the block scale as a bf16 pair S (built from an 8-bit code with one
//  integer multiply-add) rescales to a normal number; products have <= 6 significant bits,
//  so the bf16 result is exact. The remaining power of two (and NVFP4's F32 global scale)
//  is alpha, applied to the float32 accumulators.
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "dsv4cuda.h"
#include "qgemm_common.cuh"
#include "qgemm_large.h"
#include "qgemv_stream.h"

namespace {

// Environment switches, read once per process. DSV4GO_PDL=1: programmatic dependent launch
// for the decode kernels. DSV4GO_GEMV_OLD=1: the first decode kernel (qgemv_kernel) instead
// of qgemv2_kernel everywhere (the benchmark's before/after).
static bool gemv_pdl() {
  static const bool on = env_flag("DSV4GO_PDL");
  return on;
}
static bool gemv_old() {
  static const bool on = env_flag("DSV4GO_GEMV_OLD");
  return on;
}
// Benchmark knobs of the decode kernel (-1 = automatic): DSV4GO_GEMV2_LGKW forces log2 of
// the K-slices per block (0..3), DSV4GO_GEMV2_MINBLOCKS the grid size under which K is also
// split over blocks.
static int gemv2_lgkw() {
  static const int v = env_int("DSV4GO_GEMV2_LGKW", -1);
  return v;
}
// DSV4GO_GEMV2_ALL=1: the second decode kernel for every decode GEMV (grouped too).
static bool gemv2_all() {
  static const bool on = env_flag("DSV4GO_GEMV2_ALL");
  return on;
}
static int gemv2_minblocks() {
  static const int v = env_int("DSV4GO_GEMV2_MINBLOCKS", 16);
  return v;
}

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
    }
    if (FMT == DSV4C_FMT_NVFP4) {
      R.s[r][0] = __ldg(reinterpret_cast<const uint32_t *>(sc + (base >> 1) * 128) + lane);
    } else if (FMT == DSV4C_FMT_MXFP4) {
      R.s[r][0] = __ldg(reinterpret_cast<const uint32_t *>(sc + (base >> 1) * 64 + g * 8 + (lane & 2) * 2));
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

  float acc[RT][MT][4] = {}; // float32 accumulators, zeroed

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

    // B fragments (permuted-K layout): lane (g,t) of n8 tile n holds, for the four k16
    // steps of a 64-K tile, x[tok n*8+g][64*tile + 16t .. 16t+15] (two 16-byte loads).
    uint32_t bx[MT][8];
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
      if ((kk & 3) == 0) {
#pragma unroll
        for (int n = 0; n < MT; n++) {
          const uint4 *src = reinterpret_cast<const uint4 *>(&xs[buf][n * 8 + g][(kk >> 2) * 64 + 16 * t]);
          uint4 lo = src[0], hi = src[1];
          bx[n][0] = lo.x; bx[n][1] = lo.y; bx[n][2] = lo.z; bx[n][3] = lo.w;
          bx[n][4] = hi.x; bx[n][5] = hi.y; bx[n][6] = hi.z; bx[n][7] = hi.w;
        }
      }
      const int bo = (kk & 3) * 2;
      const int h = kk >> 2, j = kk & 3;
#pragma unroll
      for (int r = 0; r < RT; r++) {
        uint32_t a[4];
        decode_a<FMT>(&cur.w[r][h * Fmt<FMT>::WQ], cur.s[r][0], h, j, a);
#pragma unroll
        for (int n = 0; n < MT; n++) mma16816(acc[r][n], a, bx[n][bo], bx[n][bo + 1]);
      }
    }
    __syncthreads();
    if (more) cur = nxt;
  }

  store_acc<RT, MT>(acc, rt0, ntiles, tok0, alpha, y, ldy, M, N, lane, atomic != 0, false);
}

// ---- decode-shaped GEMV/GEMM (M <= 16 tokens per group) ----
//
// The block stages its whole K range of x (TOK tokens) in shared memory once; then each warp
// streams RT row tiles along that K range with a register double buffer (two 64-K tiles
// per step), with no block-wide barrier in the loop. Split-K over blockIdx.y (float32
// atomics into y zeroed by the launcher), groups (MoE experts) over blockIdx.z: group z uses
// expert ids[z] of a stacked weight (or expert z when ids is NULL), its own x and y slices.
template <int FMT, int RT> struct Chunk {
  uint4 w[RT][2 * Fmt<FMT>::WQ];
  uint32_t s[RT][2 * Fmt<FMT>::SW];
};

template <int FMT, int MT, int RT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    qgemv_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, long long wstride,
                 long long sstride, int ntiles, int K, float alpha,
                 const float *__restrict__ alphas, const int *__restrict__ ids,
                 const __nv_bfloat16 *__restrict__ x, long long xstride, float *__restrict__ y,
                 long long ystride, int M, int N, int krange, int accumulate, int E,
                 int mode) {
  // mode: 0 = one split (store), 1 = split-K with float32 atomics into y zeroed by the
  // launcher, 2 = split-K reduced through cluster distributed shared memory.
  constexpr int TOK = MT * 8;
  constexpr int WQ = Fmt<FMT>::WQ;
  extern __shared__ uint4 smem[];
  __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int grp = blockIdx.z;
  const int e = group_expert(ids, grp);
  if (e < 0 || e >= E) return; // invalid expert id: group left untouched (uniform per cluster)
  w += (size_t)e * wstride;
  sc += (size_t)e * sstride;
  const float a_scale = alphas ? alphas[e] * alpha : alpha;
  x += (size_t)grp * xstride;
  y += (size_t)grp * ystride;

  const int kbeg = blockIdx.y * krange;
  const int nk = min(K, kbeg + krange) - kbeg; // multiple of 128, > 0 by construction
  const int XR = nk + 8;                       // smem row in elements: stride 16 (mod 128) B
  const int rt0 = (blockIdx.x * WARPS + warp) * RT;
  const bool active = rt0 < ntiles;
  const int KT = K / 64;
  const int kt0 = kbeg / 64;

  const uint4 *wp[RT];
  const uint8_t *sp[RT];
#pragma unroll
  for (int r = 0; r < RT; r++) {
    int rt = min(rt0 + r, ntiles - 1);
    wp[r] = w + ((size_t)rt * KT + kt0) * (32 * WQ) + lane * WQ;
    sp[r] = scale_ptr<FMT>(sc, rt, KT, kt0, lane);
  }

  auto load = [&](Chunk<FMT, RT> &c) {
#pragma unroll
    for (int r = 0; r < RT; r++) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int i = 0; i < WQ; i++) c.w[r][h * WQ + i] = ldg_stream(wp[r] + h * 32 * WQ + i);
      }
      if (FMT == DSV4C_FMT_FP8B) {
        c.s[r][0] = __ldg(sp[r]);
        sp[r] += 1;
      } else {
        c.s[r][0] = __ldg(reinterpret_cast<const uint32_t *>(sp[r]));
        sp[r] += (FMT == DSV4C_FMT_NVFP4 ? 128 : 64);
      }
      wp[r] += 2 * 32 * WQ;
    }
  };

  // With DSV4GO_PDL=1 (programmatic dependent launch) the next kernel may launch now and
  // this one waits for the previous grid before reading x; without it both are no-ops.
  // x is staged before the first weight loads are issued: the order measured fastest on the
  // H200 (issuing the weight loads first made wo_b 40% slower, BENCHMARKS.md).
  const int nch = nk / 128;
  Chunk<FMT, RT> c0, c1;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  {
    const int segs = nk / 8;
    for (int i = threadIdx.x; i < TOK * segs; i += WARPS * 32) {
      int row = i / segs, seg = i - row * segs;
      bool ok = row < M;
      const __nv_bfloat16 *src = x + (size_t)(ok ? row : 0) * K + kbeg + seg * 8;
      cp_async16(xs + row * XR + seg * 8, src, ok);
    }
    cp_commit();
    cp_wait<0>();
    __syncthreads();
  }
  if (active) load(c0);

  float acc[RT][MT][4] = {}; // float32 accumulators, zeroed

  auto compute = [&](const Chunk<FMT, RT> &c, int kloc) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint32_t bx[MT][8];
#pragma unroll
      for (int n = 0; n < MT; n++) {
        if (n * 8 + g < M || n == 0) { // rows past M are zero in smem; skip for n > 0
          const uint4 *src = reinterpret_cast<const uint4 *>(xs + (n * 8 + g) * XR + kloc + h * 64 + 16 * t);
          uint4 lo = src[0], hi = src[1];
          bx[n][0] = lo.x; bx[n][1] = lo.y; bx[n][2] = lo.z; bx[n][3] = lo.w;
          bx[n][4] = hi.x; bx[n][5] = hi.y; bx[n][6] = hi.z; bx[n][7] = hi.w;
        } else {
#pragma unroll
          for (int q = 0; q < 8; q++) bx[n][q] = 0;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
#pragma unroll
        for (int r = 0; r < RT; r++) {
          uint32_t a[4];
          decode_a<FMT>(&c.w[r][h * WQ], c.s[r][0], h, j, a);
#pragma unroll
          for (int n = 0; n < MT; n++) mma16816(acc[r][n], a, bx[n][2 * j], bx[n][2 * j + 1]);
        }
      }
    }
  };

  if (active) {
    int ch = 0;
    for (; ch + 2 <= nch; ch += 2) {
      load(c1);
      compute(c0, ch * 128);
      if (ch + 2 < nch) load(c0);
      compute(c1, (ch + 1) * 128);
    }
    if (ch < nch) compute(c0, ch * 128);
  }

  // split-K: the gridDim.y CTAs of a cluster reduce through distributed shared memory into
  // rank 0, which stores (no atomics, no memset, deterministic).
  const int splits = gridDim.y;
  if (mode == 2 && splits > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float *part = reinterpret_cast<float *>(xs + TOK * XR); // [RT*MT*4][threads]
    __syncthreads();
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int q = 0; q < 4; q++) part[((r * MT + n) * 4 + q) * (WARPS * 32) + threadIdx.x] = acc[r][n][q];
    cluster.sync();
    if (cluster.block_rank() == 0) {
      for (int src = 1; src < splits; src++) {
        const float *pp = cluster.map_shared_rank(part, src);
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
          for (int n = 0; n < MT; n++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[r][n][q] += pp[((r * MT + n) * 4 + q) * (WARPS * 32) + threadIdx.x];
      }
    }
    cluster.sync(); // peers keep their shared memory alive until rank 0 has read it
    if (cluster.block_rank() != 0) return;
  }
  if (!active) return;

  store_acc<RT, MT>(acc, rt0, ntiles, 0, a_scale, y, N, M, N, lane, mode == 1, accumulate != 0);
}

// ---- decode GEMV/GEMM v2 (M <= 16 tokens per group; the default decode path) ----
//
// Built for the batch-1 decode step, where a weight matrix of a few MB must stream from HBM
// with as little fixed cost per launch as possible:
//  - a block is 8 warps laid out as RW row tiles x KW K-slices (RW * KW = 8); each warp owns
//    one 16-row tile and a contiguous run of 128-K chunks of the block's K range, so a
//    warp's weights are one contiguous stretch of 512-byte tiles (coalesced 16-byte loads);
//  - every warp issues its first three batches of weight loads (12 x 16 bytes per lane for
//    the FP4 formats) before anything else, then the block stages x (only the M real token
//    rows) in shared memory, so the x round trip overlaps the weight round trip; the three
//    batches then rotate, so two or three stay in flight while one is computed;
//  - the K-slices of a row tile are reduced through shared memory inside the block: no
//    memset node and no float32 atomics unless the launcher also splits K over blocks
//    (gridDim.y > 1: tiny N, or x rows that would not fit in shared memory);
//  - RW = 1 for M <= 8 (most blocks; x is re-read from L2 per row tile, <= 2x the weight
//    bytes at M = 8), RW = 8 for M > 8 so that x stays under half the weight bytes.
// Measured on the H200 (BENCHMARKS.md): it wins where the fixed cost of a launch dominates
// (matrices of a few MB at M <= 8: routed experts, wkv); the first decode kernel (above)
// streams large matrices faster, so launch_gemv picks between the two.
template <int FMT> struct GBatch {
  static constexpr int UC = FMT == DSV4C_FMT_FP8B ? 1 : 2; // 128-K chunks per batch
  uint4 w[UC][2 * Fmt<FMT>::WQ];
  uint32_t s[UC];
};

template <int FMT, int MT>
__global__ void __launch_bounds__(256)
    qgemv2_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, long long wstride,
                  long long sstride, int ntiles, int K, float alpha,
                  const float *__restrict__ alphas, const int *__restrict__ ids,
                  const __nv_bfloat16 *__restrict__ x, long long xstride, float *__restrict__ y,
                  long long ystride, int M, int N, int kb, int lgkw, int accumulate, int E,
                  int atomic) {
  constexpr int WQ = Fmt<FMT>::WQ;
  constexpr int UC = GBatch<FMT>::UC;
  extern __shared__ uint4 smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int KW = 1 << lgkw, RW = 8 >> lgkw;
  const int kw = warp >> (3 - lgkw), rw = warp & (RW - 1);
  const int grp = blockIdx.z;
  const int e = group_expert(ids, grp);
  if (e < 0 || e >= E) return; // invalid expert id: group left untouched (uniform per block)
  w += (size_t)e * wstride;
  sc += (size_t)e * sstride;
  const float a_scale = alphas ? alphas[e] * alpha : alpha;
  x += (size_t)grp * xstride;
  y += (size_t)grp * ystride;

  const int kbeg = blockIdx.y * kb;
  const int nk = min(K, kbeg + kb) - kbeg; // multiple of 128, > 0 by construction
  const int nchb = nk / 128;
  const int pc = (nchb + KW - 1) >> lgkw;    // chunks per K-slice
  const int cw0 = kw * pc;                   // this warp's first chunk in the block's range
  const int nc = max(0, min(nchb, cw0 + pc) - cw0);
  const int rt = blockIdx.x * RW + rw;
  const bool active = rt < ntiles && nc > 0; // warp-uniform
  const int rtc = min(rt, ntiles - 1);
  const int KT = K / 64;
  const int kt0 = kbeg / 64 + 2 * cw0;
  const uint4 *wp = w + ((size_t)rtc * KT + kt0) * (32 * WQ) + lane * WQ;
  const uint8_t *sp = scale_ptr<FMT>(sc, rtc, KT, kt0, lane);

  auto load = [&](GBatch<FMT> &b, int cb) {
#pragma unroll
    for (int u = 0; u < UC; u++) {
      const int c = cb + u;
      if (c < nc) {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int i = 0; i < WQ; i++) b.w[u][h * WQ + i] = ldg_stream(wp + (size_t)(2 * c + h) * (32 * WQ) + i);
        if (FMT == DSV4C_FMT_FP8B)
          b.s[u] = __ldg(sp + c);
        else
          b.s[u] = __ldg(reinterpret_cast<const uint32_t *>(sp + (size_t)c * (FMT == DSV4C_FMT_NVFP4 ? 128 : 64)));
      } else {
#pragma unroll
        for (int q = 0; q < 2 * WQ; q++) b.w[u][q] = make_uint4(0, 0, 0, 0);
        b.s[u] = 0;
      }
    }
  };

  const int nb = (nc + UC - 1) / UC;
  GBatch<FMT> b0, b1, b2; // three batches in flight (24 x 16 bytes per lane for FP4)
  if (active) {
    load(b0, 0);
    if (nb > 1) load(b1, UC);
    if (nb > 2) load(b2, 2 * UC);
  }

  // With DSV4GO_PDL=1 the next kernel may launch now; this one waits for the previous grid
  // only here, after its first weight loads are in flight (weights never depend on it).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");

  __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem); // [M][nk + 8]
  const int XR = nk + 8;
  {
    const int segs = nk / 8;
    for (int i = threadIdx.x; i < M * segs; i += 256) {
      const int row = i / segs, seg = i - row * segs;
      cp_async16(xs + row * XR + seg * 8, x + (size_t)row * K + kbeg + seg * 8, true);
    }
    cp_commit();
    cp_wait<0>();
    __syncthreads();
  }

  float acc[1][MT][4] = {}; // float32 accumulators, zeroed

  auto compute = [&](const GBatch<FMT> &b, int cb) {
#pragma unroll
    for (int u = 0; u < UC; u++) {
      const int c = cb + u;
      if (c < nc) {
        const int kloc = (cw0 + c) * 128;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          uint32_t bx[MT][8];
#pragma unroll
          for (int n = 0; n < MT; n++) {
            const int row = n * 8 + g;
            if (row < M) {
              const uint4 *src = reinterpret_cast<const uint4 *>(xs + row * XR + kloc + h * 64 + 16 * t);
              const uint4 lo = src[0], hi = src[1];
              bx[n][0] = lo.x; bx[n][1] = lo.y; bx[n][2] = lo.z; bx[n][3] = lo.w;
              bx[n][4] = hi.x; bx[n][5] = hi.y; bx[n][6] = hi.z; bx[n][7] = hi.w;
            } else {
#pragma unroll
              for (int q = 0; q < 8; q++) bx[n][q] = 0;
            }
          }
#pragma unroll
          for (int j = 0; j < 4; j++) {
            uint32_t a[4];
            decode_a<FMT>(&b.w[u][h * WQ], b.s[u], h, j, a);
#pragma unroll
            for (int n = 0; n < MT; n++) mma16816(acc[0][n], a, bx[n][2 * j], bx[n][2 * j + 1]);
          }
        }
      }
    }
  };

  if (active) {
    for (int bi = 0; bi < nb; bi += 3) {
      compute(b0, bi * UC);
      if (bi + 3 < nb) load(b0, (bi + 3) * UC);
      if (bi + 1 < nb) {
        compute(b1, (bi + 1) * UC);
        if (bi + 4 < nb) load(b1, (bi + 4) * UC);
      }
      if (bi + 2 < nb) {
        compute(b2, (bi + 2) * UC);
        if (bi + 5 < nb) load(b2, (bi + 5) * UC);
      }
    }
  }

  // reduce the KW K-slices of each row tile in shared memory (fixed order: deterministic)
  if (KW > 1) {
    float *red = reinterpret_cast<float *>(xs + M * XR); // [(KW-1)*RW][MT*4][32]
    if (kw > 0) {
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int q = 0; q < 4; q++)
          red[(((kw - 1) * RW + rw) * MT * 4 + n * 4 + q) * 32 + lane] = acc[0][n][q];
    }
    __syncthreads();
    if (kw == 0) {
      for (int s = 1; s < KW; s++) {
#pragma unroll
        for (int n = 0; n < MT; n++)
#pragma unroll
          for (int q = 0; q < 4; q++)
            acc[0][n][q] += red[(((s - 1) * RW + rw) * MT * 4 + n * 4 + q) * 32 + lane];
      }
    }
  }
  if (kw != 0 || rt >= ntiles) return;
  store_acc<1, MT>(acc, rt, ntiles, 0, a_scale, y, N, M, N, lane, atomic != 0, accumulate != 0);
}

constexpr int GEMV2_SMEM_MAX = 100 * 1024; // x rows + reduction scratch, bytes

template <int FMT, int MT>
int launch_gemv2(const void *w, const void *sc, long long wstride, long long sstride, int N,
                 int npad, int K, float alpha, const float *alphas, const int *ids,
                 const void *x, float *y, int M, int G, int accumulate, int splits,
                 cudaStream_t st, int E) {
  const int ntiles = npad / 16;
  const int kch = K / 128;
  // RW row tiles per block (above), the rest of the 8 warps split K; fewer K-slices when a
  // slice would get fewer than 4 chunks.
  int lgrw = M <= 8 ? 0 : 3;
  int lgkw = 3 - lgrw;
  while (lgkw > 0 && kch < 4 << lgkw) lgkw--;
  if (gemv2_lgkw() >= 0 && gemv2_lgkw() <= 3) lgkw = gemv2_lgkw();
  const int RW = 8 >> lgkw;
  const int rowBlocks = (ntiles + RW - 1) / RW;
  if (splits <= 0) { // split K over blocks only when the grid would be tiny
    const int blocks = rowBlocks * G;
    const int minb = gemv2_minblocks();
    splits = blocks >= minb ? 1 : (2 * minb + blocks - 1) / blocks;
  }
  auto xbytes = [&](int s) { return (size_t)M * (((kch + s - 1) / s) * 128 + 8) * 2; };
  const size_t red = (size_t)((1 << lgkw) - 1) * RW * MT * 4 * 32 * sizeof(float);
  const int cap = min(GEMV2_SMEM_MAX, smem_optin_max());
  while (splits < kch && xbytes(splits) + red > (size_t)cap) splits++;
  if (splits > kch) splits = kch;
  const int per = (kch + splits - 1) / splits;
  splits = (kch + per - 1) / per;
  const size_t smem = xbytes(splits) + red;
  if (smem > (size_t)cap) return DSV4C_ERR_SHAPE;
  const int atomic = splits > 1;
  if (atomic && !accumulate) {
    cudaError_t e = cudaMemsetAsync(y, 0, (size_t)G * M * N * sizeof(float), st);
    if (e != cudaSuccess) return (int)e;
  }
  auto kern = qgemv2_kernel<FMT, MT>;
  static DeviceOnce smemOptIn; // per instantiation and device
  if (int e = opt_in_smem(smemOptIn, kern, cap)) return e;
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(rowBlocks, splits, G);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  int na = 0;
  if (gemv_pdl()) pdl_attr(attr[na++]);
  cfg.attrs = attr;
  cfg.numAttrs = na;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kern, (const uint4 *)w, (const uint8_t *)sc,
                                       (long long)(wstride / 16), (long long)sstride, ntiles, K,
                                       alpha, alphas, ids, (const __nv_bfloat16 *)x,
                                       (long long)M * K, y, (long long)M * N, M, N, per * 128,
                                       lgkw, accumulate, ids ? E : G, atomic);
  return (int)err;
}

// ---- prefill-shaped GEMM (large M): multistage cp.async pipeline ----
//
// Block: 8 warps x 2 row tiles = 256 weight rows, 64 tokens; K in 128-input chunks staged
// through a 3-deep shared-memory ring (packed weights, scales, x), so global latency is
// hidden; each warp decodes its 32 rows from shared memory into bf16 A fragments and runs
// 16 mma.sync per k16 step. No split-K (used when the grid fills the GPU).
constexpr int PIPE_STAGES = 3, PIPE_WARPS = 8, PIPE_RT = 2, PIPE_TOK = 64;
constexpr int PIPE_ROWT = PIPE_WARPS * PIPE_RT; // row tiles per block

template <int FMT> struct PipeSmem {
  static constexpr int WQ = Fmt<FMT>::WQ;
  static constexpr int W = PIPE_ROWT * 2 * 512 * WQ;                       // bytes
  static constexpr int S = FMT == DSV4C_FMT_NVFP4 ? PIPE_ROWT * 128 : FMT == DSV4C_FMT_MXFP4 ? PIPE_ROWT * 64 : 0;
  static constexpr int X = PIPE_TOK * XPAD * 2;
  static constexpr int STAGE = W + S + X;
  static constexpr int TOTAL = STAGE * PIPE_STAGES;
};

template <int FMT, int MINB>
__global__ void __launch_bounds__(PIPE_WARPS * 32, MINB)
    qgemm_pipe_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles,
                      int K, float alpha, const __nv_bfloat16 *__restrict__ x, int ldx,
                      float *__restrict__ y, int ldy, int M, int N, int accumulate) {
  using L = PipeSmem<FMT>;
  constexpr int WQ = L::WQ, MT = PIPE_TOK / 8, RT = PIPE_RT;
  extern __shared__ uint4 smem[];
  uint8_t *base = reinterpret_cast<uint8_t *>(smem);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int brt0 = blockIdx.x * PIPE_ROWT;
  const int tok0 = blockIdx.z * PIPE_TOK;
  const int KT = K / 64, nch = K / KC;

  auto issue = [&](int c) {
    uint8_t *st = base + (c % PIPE_STAGES) * L::STAGE;
    const int kt0 = c * 2;
    // weights: PIPE_ROWT row tiles x (2 tiles x 512*WQ bytes), contiguous per row tile
    for (int u = threadIdx.x; u < PIPE_ROWT * 64 * WQ; u += PIPE_WARPS * 32) {
      int rl = u / (64 * WQ), rem = u - rl * (64 * WQ);
      int rt = min(brt0 + rl, ntiles - 1);
      cp_async16(st + (size_t)u * 16, w + ((size_t)rt * KT + kt0) * (32 * WQ) + rem, true);
    }
    if (FMT != DSV4C_FMT_FP8B) {
      constexpr int SU = L::S / 16 / PIPE_ROWT > 0 ? L::S / 16 / PIPE_ROWT : 1; // 16-byte units per row tile
      for (int u = threadIdx.x; u < PIPE_ROWT * SU; u += PIPE_WARPS * 32) {
        int rl = u / SU, rem = u - rl * SU;
        int rt = min(brt0 + rl, ntiles - 1);
        cp_async16(st + L::W + (size_t)u * 16, sc + ((size_t)rt * KT + kt0) / 2 * (SU * 16) + rem * 16, true);
      }
    }
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(st + L::W + L::S);
    for (int u = threadIdx.x; u < PIPE_TOK * (KC / 8); u += PIPE_WARPS * 32) {
      int row = u / (KC / 8), seg = u - row * (KC / 8);
      int tok = tok0 + row;
      bool ok = tok < M;
      cp_async16(xs + row * XPAD + seg * 8, x + (size_t)(ok ? tok : 0) * ldx + c * KC + seg * 8, ok);
    }
  };

  float acc[RT][MT][4] = {}; // float32 accumulators, zeroed

#pragma unroll
  for (int s0 = 0; s0 < PIPE_STAGES - 1; s0++) {
    if (s0 < nch) issue(s0);
    cp_commit();
  }
  for (int c = 0; c < nch; c++) {
    cp_wait<PIPE_STAGES - 2>();
    __syncthreads();
    if (c + PIPE_STAGES - 1 < nch) issue(c + PIPE_STAGES - 1);
    cp_commit();
    const uint8_t *st = base + (c % PIPE_STAGES) * L::STAGE;
    const __nv_bfloat16 *xs = reinterpret_cast<const __nv_bfloat16 *>(st + L::W + L::S);
    uint32_t sw[RT];
#pragma unroll
    for (int r = 0; r < RT; r++) {
      const int rl = warp * RT + r;
      if (FMT == DSV4C_FMT_NVFP4)
        sw[r] = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 128 + lane * 4);
      else if (FMT == DSV4C_FMT_MXFP4)
        sw[r] = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 64 + g * 8 + (t >> 1) * 4);
      else
        sw[r] = __ldg(sc + (size_t)(min(brt0 + rl, ntiles - 1) >> 3) * (KT / 2) + c);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint4 wv[RT][WQ];
#pragma unroll
      for (int r = 0; r < RT; r++)
#pragma unroll
        for (int i = 0; i < WQ; i++)
          wv[r][i] = *reinterpret_cast<const uint4 *>(st + (((warp * RT + r) * 2 + h) * 32 + lane) * 16 * WQ + i * 16);
#pragma unroll
      for (int jp = 0; jp < 2; jp++) {
        uint32_t bx[MT][4];
#pragma unroll
        for (int n = 0; n < MT; n++) {
          uint4 v = *reinterpret_cast<const uint4 *>(xs + (n * 8 + g) * XPAD + h * 64 + 16 * t + 8 * jp);
          bx[n][0] = v.x; bx[n][1] = v.y; bx[n][2] = v.z; bx[n][3] = v.w;
        }
#pragma unroll
        for (int jj = 0; jj < 2; jj++) {
          const int j = jp * 2 + jj;
#pragma unroll
          for (int r = 0; r < RT; r++) {
            uint32_t a[4];
            decode_a<FMT>(wv[r], sw[r], h, j, a);
#pragma unroll
            for (int n = 0; n < MT; n++) mma16816(acc[r][n], a, bx[n][2 * jj], bx[n][2 * jj + 1]);
          }
        }
      }
    }
  }
  cp_wait<0>();

  store_acc<RT, MT>(acc, brt0 + warp * RT, ntiles, tok0, alpha, y, ldy, M, N, lane, false, accumulate != 0);
}

template <int FMT, int MINB>
int launch_pipe_b(const void *w, const void *sc, int N, int npad, int K, float alpha,
                  const void *x, int ldx, float *y, int ldy, int M, int accumulate,
                  cudaStream_t st) {
  using L = PipeSmem<FMT>;
  const int ntiles = npad / 16;
  dim3 grid((ntiles + PIPE_ROWT - 1) / PIPE_ROWT, 1, (M + PIPE_TOK - 1) / PIPE_TOK);
  static DeviceOnce smemOptIn; // per instantiation and device
  if (int e = opt_in_smem(smemOptIn, qgemm_pipe_kernel<FMT, MINB>, L::TOTAL)) return e;
  (void)cudaGetLastError();
  qgemm_pipe_kernel<FMT, MINB><<<grid, PIPE_WARPS * 32, L::TOTAL, st>>>(
      (const uint4 *)w, (const uint8_t *)sc, ntiles, K, alpha, (const __nv_bfloat16 *)x, ldx, y,
      ldy, M, N, accumulate);
  return (int)cudaGetLastError();
}

// DSV4GO_PIPE_MINB=1 selects the 1-block-per-SM build of the pipeline kernel (more registers,
// no spills); the default is 2 blocks per SM.
template <int FMT>
int launch_pipe(const void *w, const void *sc, int N, int npad, int K, float alpha, const void *x,
                int ldx, float *y, int ldy, int M, int accumulate, cudaStream_t st) {
  static const int minb = env_flag("DSV4GO_PIPE_MINB") ? 1 : 2;
  if (minb == 1)
    return launch_pipe_b<FMT, 1>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, st);
  return launch_pipe_b<FMT, 2>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, st);
}

// packed_bytes is the size of an npad x K weight's packed values in format FMT (E2M1: half a
// byte each; FP8: one), scales excluded: the dispatch rules' measure of a matrix.
template <int FMT> size_t packed_bytes(int npad, int K) {
  return (size_t)npad * K / (FMT == DSV4C_FMT_FP8B ? 1 : 2);
}

template <int FMT, int MT>
int launch_gemv(const void *w, const void *sc, long long wstride, long long sstride, int N,
                int npad, int K, float alpha, const float *alphas, const int *ids, const void *x,
                float *y, int M, int G, int accumulate, int splits, cudaStream_t st, int E = 1) {
  // Split factor left to the kernels: the streaming kernel (qgemv_stream.cu) for one matrix
  // and for grouped launches (DSV4GO_GEMV3_GROUPED=0: not for those), unless DSV4GO_GEMV3=0
  // or one of the switches below forces an older kernel.
  // accumulate: bit 0 y += ..., DSV4C_IDS_READY (grouped launches, dsv4c_qgemm_grouped) only
  // for the streaming kernel; the kernels below read the ids after their wait in any case.
  const int flags = accumulate;
  accumulate &= 1;
  if (splits <= 0 && !gemv_old() && !gemv2_all() && dsv4c_qgemv_stream_enabled(FMT, G > 1)) {
    const int r = dsv4c_qgemv_stream(FMT, w, sc, wstride, sstride, N, npad, K, alpha, alphas,
                                     ids, x, y, M, G, ids ? E : G, flags, 0.f, nullptr, st);
    if (r != DSV4C_ERR_SHAPE) return r; // declined (see qgemv_stream.h): the kernels below
  }
  dsv4c_gemv_path_set(DSV4C_GEMV_EARLIER);
  // The second kernel where a launch's fixed cost dominates: one matrix (not grouped) of at
  // most 8 MB of packed weights, M <= 8. DSV4GO_GEMV2_ALL=1 / DSV4GO_GEMV_OLD=1 force one.
  const bool v2 = !gemv_old() && (gemv2_all() || (G == 1 && M <= 8 && packed_bytes<FMT>(npad, K) <= ((size_t)8 << 20)));
  if (v2)
    return launch_gemv2<FMT, MT>(w, sc, wstride, sstride, N, npad, K, alpha, alphas, ids, x, y, M,
                                 G, accumulate, splits, st, E);
  constexpr int RT = 2, WARPS = 4, TOK = MT * 8;
  const int ntiles = npad / 16;
  const int rowBlocks = (ntiles + WARPS * RT - 1) / (WARPS * RT);
  const int kch = K / 128;
  // shared-memory cap: TOK x (krange + 8) bf16 <= 40 KB
  const int maxch = (40 * 1024 / (TOK * 2) - 8) / 128;
  if (splits <= 0) {
    const int sms = device_sms();
    int blocks = rowBlocks * G;
    // target blocks per SM (DSV4GO_GEMV_BPS overrides): 6 when K <= 2048 and M <= 8, else 4.
    // Same call (2026-11-30 05:15, NVFP4 grouped MoE launches at M = 1): 6 experts' w2 (K =
    // 2048; 6 gives 4 splits of 4 chunks) 11.44 against 12.75 us at 4; 12 w1/w3 matrices (K =
    // 4096) 20.14 at 6 against 19.62 us at 4 (3 splits); 3 and 8 no better for either. Run T
    // (05:22): w2 at M = 1 / 4 / 16 11.37 / 12.27 / 17.24 us at 6 against 12.62 / 13.30 / 16.65
    // at 4 (BENCHMARKS.md).
    static const int bps_env = env_int("DSV4GO_GEMV_BPS", -1);
    const int bps = bps_env > 0 ? bps_env : (kch <= 16 && M <= 8) ? 6 : 4;
    int target = bps * sms;
    splits = blocks >= target ? 1 : (target + blocks - 1) / blocks;
    splits = min(splits, max(1, kch / 2)); // keep >= 2 chunks per split when possible
  }
  splits = max(splits, (kch + maxch - 1) / maxch);
  if (splits > kch) splits = kch;
  // Split-K reduction: float32 atomics into y zeroed first (default; measured faster on the
  // H200), or DSV4GO_GEMV_CLUSTER=1: a thread-block cluster per split group reducing through
  // distributed shared memory (no memset, deterministic; at most 16 splits).
  static const int use_cluster = env_flag("DSV4GO_GEMV_CLUSTER") ? 1 : 0;
  if (use_cluster && splits > 16) splits = 16;
  int per = (kch + splits - 1) / splits;
  splits = (kch + per - 1) / per;
  if (per > maxch) return DSV4C_ERR_SHAPE;
  const int mode = splits == 1 ? 0 : (use_cluster ? 2 : 1);
  if (mode == 1 && !accumulate) {
    cudaError_t e = cudaMemsetAsync(y, 0, (size_t)G * M * N * sizeof(float), st);
    if (e != cudaSuccess) return (int)e;
  }
  dim3 grid(rowBlocks, splits, G);
  size_t smem = (size_t)TOK * (per * 128 + 8) * 2;
  if (mode == 2) smem += (size_t)RT * MT * 4 * WARPS * 32 * sizeof(float);
  auto kern = qgemv_kernel<FMT, MT, RT, WARPS>;
  static bool np_set = false; // allow clusters of up to 16 CTAs (benign race: idempotent)
  if (mode == 2 && !np_set && splits > 8) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) return (int)e;
    np_set = true;
  }
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(WARPS * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  // Programmatic dependent launch is opt-in (DSV4GO_PDL=1): on the H200 it made back-to-back
  // GEMVs slower (early-launched dependents hold SM slots), see BENCHMARKS.md.
  const bool use_pdl = gemv_pdl();
  cudaLaunchAttribute attr[2];
  int na = 0;
  if (use_pdl) pdl_attr(attr[na++]);
  if (mode == 2) cluster_attr(attr[na++], 1, splits);
  cfg.attrs = attr;
  cfg.numAttrs = na;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kern, (const uint4 *)w, (const uint8_t *)sc,
                                       (long long)(wstride / 16), (long long)sstride, ntiles, K,
                                       alpha, alphas, ids, (const __nv_bfloat16 *)x,
                                       (long long)M * K, y, (long long)M * N, M, N, per * 128,
                                       accumulate, ids ? E : G, mode);
  return (int)err;
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
    const int sms = device_sms();
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
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  qgemm_kernel<FMT, MT, RT, WARPS><<<grid, WARPS * 32, 0, st>>>(
      (const uint4 *)w, (const uint8_t *)sc, ntiles, K, alpha, (const __nv_bfloat16 *)x, ldx, y,
      ldy, M, N, per * KC, atomic);
  return (int)cudaGetLastError();
}

template <int FMT>
int dispatch(const void *w, const void *sc, int N, int npad, int K, float alpha, const void *x,
             int ldx, float *y, int ldy, int M, int accumulate, int splits, cudaStream_t st) {
  if (ldx == K && ldy == N) {
    if (M <= 8)
      return launch_gemv<FMT, 1>(w, sc, 0, 0, N, npad, K, alpha, nullptr, nullptr, x, y, M, 1,
                                 accumulate, splits, st);
    if (M <= 16)
      return launch_gemv<FMT, 2>(w, sc, 0, 0, N, npad, K, alpha, nullptr, nullptr, x, y, M, 1,
                                 accumulate, splits, st);
  }
  // DSV4GO_QGEMM_MID (benchmark knob, M = 17..64 with the split left to the library): 1 the
  // wgmma kernel, 2 the pipelined mma.sync kernel, 4 the rule below with 4 warps per block
  // for every format and K, 8 the 64-token tiles that took M = 33..64 until 2026-12-01; else the rule below.
  static const int mid = env_int("DSV4GO_QGEMM_MID", -1);
  if (M > 16 && M <= 64 && splits == 0 && mid > 0) {
    if (mid == 1 && dsv4c_qgemm_large_ok())
      return dsv4c_qgemm_large(FMT, w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, 0, st);
    if (mid == 2 && ldx % 8 == 0)
      return launch_pipe<FMT>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, st);
    if (mid == 8 && M > 32)
      return launch<FMT, 8, 2, 8>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  }
  if (M <= 8)
    return launch<FMT, 1, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  if (M <= 16)
    return launch<FMT, 2, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
  // M = 17..64: 32-token tiles, 8 warps per block for FP4 where K >= 8192. For M = 33..64 a second
  // group of blocks (blockIdx.z) takes tokens 33..64 and reads the same weights, which L2
  // serves while the packed weights are at most 20 MB; larger ones keep the 64-token tiles
  // (each weight read once). H200, same calls (2026-12-01 11:47-11:55, cudabench, us at M =
  // 48 / 64, 32-token tiles against 64-token tiles): NVFP4 w1/w3 9.64 / 10.38 against 13.39 /
  // 15.34, w2 9.77 / 10.57 against 13.07 / 15.05, wq_b 21.67 / 22.57 against 30.40 / 33.98, wo_b
  // 21.75 / 22.83 against 27.24 / 29.71, wkv 5.85 / 6.60 against 6.94 / 7.68 (MXFP4 the same
  // within 5 %); FP8-block experts 12.96-13.62 against 14.44-16.75, but FP8-block wq_b (33.5 MB)
  // 40.67 / 41.70 against 35.21 / 38.89 and wo_b 45.19 / 45.86 against 32.44 / 34.90. 8 warps
  // per block for NVFP4 wo_b (K = 8192) at M = 17 / 32 / 48 / 64: 13.52 / 15.47 / 21.74 / 22.93
  // against 16.03 / 16.94 / 26.95 / 27.72 with 4 (MXFP4 alike), but FP8-block wo_b at M = 17 /
  // 24 / 32: 25.21 / 25.47 / 26.03 against 21.64 / 22.00 / 22.45 with 4 (11:59 call). Tried in the same calls and slower: 4 row
  // tiles per warp, one row tile per warp (32- or 64-token tiles), 16-token tiles, twice the
  // blocks per SM, and the wgmma and pipelined kernels (14-15 us for w1/w3 at any M = 24..128:
  // their split-K costs more than the tile). Negative splits (tests) keep forcing the kernels
  // below for M = 33..64.
  {
    if (M <= 32 || (M <= 64 && splits >= 0 && packed_bytes<FMT>(npad, K) <= ((size_t)20 << 20))) {
      if (K >= 8192 && FMT != DSV4C_FMT_FP8B && mid != 4)
        return launch<FMT, 4, 2, 8>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
      return launch<FMT, 4, 2, 4>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
    }
  }
  // Large M on compute capability 9.0: the wgmma kernel (qgemm_large.cu, sm_90a); splits == -2
  // forces it for any M > 32 (tests). DSV4GO_QGEMM_WGMMA=0 keeps the mma.sync kernels below.
  if ((splits == -2 || (M > 64 && splits == 0)) && dsv4c_qgemm_large_ok())
    return dsv4c_qgemm_large(FMT, w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, 0, st);
  {
    const int blocks = (npad / 16 + PIPE_ROWT - 1) / PIPE_ROWT * ((M + PIPE_TOK - 1) / PIPE_TOK);
    if ((splits == -1 || (M > 64 && splits <= 1 && blocks >= 128)) && ldx % 8 == 0)
      return launch_pipe<FMT>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, st);
  }
  return launch<FMT, 8, 2, 8>(w, sc, N, npad, K, alpha, x, ldx, y, ldy, M, accumulate, splits, st);
}

} // namespace

extern "C" int dsv4c_qgemm_cfg(int fmt, const void *d_w, const void *d_scales, int N, int npad,
                               int K, float alpha, const void *d_x, int ldx, float *d_y, int ldy,
                               int M, int accumulate, int splits, void *stream) {
  accumulate = accumulate != 0; // y += for any nonzero value (DSV4C_IDS_READY is grouped only)
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

// grouped_args_bad reports arguments that no grouped launch takes: accumulate bits other than
// y += and DSV4C_IDS_READY, M outside 1..16, G outside 1..65535, K not a positive multiple of
// KC, npad not a multiple of 64 at least N, wstride not 16-byte, x (bf16 x or float32 gate /
// up rows) or w not 16-byte aligned. dsv4c_qgemm_grouped and dsv4c_qgemm_grouped_swiglu.
static bool grouped_args_bad(int accumulate, int N, int npad, int K, int M, int G, long long wstride,
                             const void *x, const void *w) {
  return (accumulate & ~(1 | DSV4C_IDS_READY)) != 0 || N <= 0 || M <= 0 || M > 16 || G <= 0 ||
         G > 65535 || K <= 0 || K % KC != 0 || npad % 64 != 0 || npad < N || wstride % 16 != 0 ||
         ((uintptr_t)x & 15) != 0 || ((uintptr_t)w & 15) != 0;
}

extern "C" int dsv4c_qgemm_grouped(int fmt, const void *d_w, const void *d_scales,
                                   long long wstride, long long sstride, int N, int npad, int K,
                                   float alpha, const float *d_alphas, const int32_t *d_ids,
                                   const void *d_x, float *d_y, int M, int G, int E,
                                   int accumulate, void *stream) {
  if (grouped_args_bad(accumulate, N, npad, K, M, G, wstride, d_x, d_w)) return DSV4C_ERR_SHAPE;
  cudaStream_t st = (cudaStream_t)stream;
#define GROUPED(F)                                                                              \
  return M <= 8 ? launch_gemv<F, 1>(d_w, d_scales, wstride, sstride, N, npad, K, alpha,         \
                                    d_alphas, d_ids, d_x, d_y, M, G, accumulate, 0, st, E)         \
                : launch_gemv<F, 2>(d_w, d_scales, wstride, sstride, N, npad, K, alpha,         \
                                    d_alphas, d_ids, d_x, d_y, M, G, accumulate, 0, st, E)
  switch (fmt) {
  case DSV4C_FMT_NVFP4:
    GROUPED(DSV4C_FMT_NVFP4);
  case DSV4C_FMT_MXFP4:
    GROUPED(DSV4C_FMT_MXFP4);
  case DSV4C_FMT_FP8B:
    GROUPED(DSV4C_FMT_FP8B);
  }
#undef GROUPED
  return DSV4C_ERR_FORMAT;
}

extern "C" int dsv4c_qgemm_grouped_swiglu(int fmt, const void *d_w, const void *d_scales,
                                          long long wstride, long long sstride, int N, int npad,
                                          int K, float alpha, const float *d_alphas,
                                          const int32_t *d_ids, const float *d_gu, float *d_y,
                                          int M, int G, int E, int accumulate, float limit,
                                          void *stream) {
  if (grouped_args_bad(accumulate, N, npad, K, M, G, wstride, d_gu, d_w) || G <= 1 || !(limit == limit))
    return DSV4C_ERR_SHAPE;
  cudaStream_t st = (cudaStream_t)stream;
  if (fmt != DSV4C_FMT_NVFP4 && fmt != DSV4C_FMT_MXFP4 && fmt != DSV4C_FMT_FP8B) return DSV4C_ERR_FORMAT;
  if (!gemv_old() && !gemv2_all() && dsv4c_qgemv_stream_enabled(fmt, 1)) {
    const int r = dsv4c_qgemv_stream(fmt, d_w, d_scales, wstride, sstride, N, npad, K, alpha, d_alphas,
                                     d_ids, d_gu, d_y, M, G, d_ids ? E : G,
                                     accumulate | DSV4C_X_SWIGLU, limit, nullptr, st);
    if (r != DSV4C_ERR_SHAPE) return r;
  }
  // Declined (or the streaming kernel switched off): the SwiGLU into stream-ordered scratch
  // (a graph allocation node under capture), then the grouped launch on it.
  const long long n = (long long)G * M * K;
  void *h = nullptr;
  cudaError_t e = cudaMallocAsync(&h, (size_t)n * 2, st);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // not sticky: leave no stale error for the next launch's check
    return (int)e;
  }
  int r = dsv4c_swiglu(nullptr, h, d_gu, d_gu + n, n, limit, stream);
  if (r == 0)
    r = dsv4c_qgemm_grouped(fmt, d_w, d_scales, wstride, sstride, N, npad, K, alpha, d_alphas, d_ids, h,
                            d_y, M, G, E, accumulate, stream);
  e = cudaFreeAsync(h, st);
  return r != 0 ? r : (int)e;
}

// The form of the last dsv4c_moe (dsv4c_moe_path; a test hook).
static std::atomic<int> moe_path{0};

extern "C" int dsv4c_moe_path(void) { return moe_path.load(std::memory_order_relaxed); }

extern "C" int dsv4c_moe(int fmt, const void *d_w13, const void *d_s13, long long wstride13,
                         long long sstride13, const float *d_al13, const void *d_w2,
                         const void *d_s2, long long wstride2, long long sstride2,
                         const float *d_al2, int H, int I, int npad13, int npad2, int E,
                         const int32_t *d_ids, const void *d_x, float *d_gu, void *d_h,
                         float *d_y, int M, int G, int accumulate, float limit, void *stream) {
  if ((accumulate & ~(1 | DSV4C_IDS_READY)) != 0 || M <= 0 || M > 16 || G <= 1 || G > 65535 ||
      E <= 0 || H <= 0 || I <= 0 || H % KC != 0 || I % KC != 0 || npad13 < I || npad2 < H ||
      npad13 % 64 != 0 || npad2 % 64 != 0 || wstride13 % 16 != 0 || sstride13 % 16 != 0 ||
      wstride2 % 16 != 0 || sstride2 % 16 != 0 || !d_gu || !d_h || !(limit == limit) ||
      (!d_ids && G > E) ||
      (((uintptr_t)d_w13 | (uintptr_t)d_s13 | (uintptr_t)d_w2 | (uintptr_t)d_s2 | (uintptr_t)d_x |
        (uintptr_t)d_gu | (uintptr_t)d_h) & 15) != 0)
    return DSV4C_ERR_SHAPE; // every check up front: a bad argument queues no launch
  if (fmt != DSV4C_FMT_NVFP4 && fmt != DSV4C_FMT_MXFP4 && fmt != DSV4C_FMT_FP8B) return DSV4C_ERR_FORMAT;
  cudaStream_t st = (cudaStream_t)stream;
  const int ready = accumulate & DSV4C_IDS_READY;
  // w1 / w3, in the first of these forms that the kernels take:
  //  1. (FP4) one launch of G groups whose blocks each stream the same rows of w1 and w3 and make
  //     their bf16 SwiGLU from shared memory (DSV4C_W13_ROWS; declined when those rows and x do
  //     not fit beside the rings), then w2 on it;
  //  2. one launch of 2G groups (DSV4C_W13_PAIRS) into gate / up, then at m < 3 w2 staging their
  //     SwiGLU (dsv4c_qgemm_grouped_swiglu), from m = 3
  //  3. a SwiGLU launch and w2 on its bf16 output;
  //  4. w1 and w3 (the stack's halves) one launch each, the SwiGLU launch, w2.
  // Same call (2026-11-30 16:39, run BI; NVFP4, ids ready, tokens routed top-6 over 256 experts;
  // us, form 1 / 2 / 3; BENCHMARKS.md): 1 token (6 slots of 1 row) 28.10 / 28.96 / 32.61, 4
  // tokens (24 x 1) 89.39 / 94.92 / 99.72, 16 tokens (80 x 3) 325.74 / 343.01 / 328.51. Forms 2
  // and 3 (where form 1 declines: FP8-block, or rows and x too large) swap places between calls
  // at 3 rows per slot (16:24 and 16:32: 334.5 / 313.2 and 343.7 / 308.6). DSV4GO_MOE_FORM=n
  // tries only form n, then form 4.
  static const int form = env_int("DSV4GO_MOE_FORM", 0);
  const bool streamOK = !gemv_old() && !gemv2_all() && dsv4c_qgemv_stream_enabled(fmt, 1);
  const size_t n = (size_t)G * M * I;
  int r = DSV4C_ERR_SHAPE, path = 0;
  if (streamOK && (form == 0 || form == 1)) {
    r = dsv4c_qgemv_stream(fmt, d_w13, d_s13, wstride13, sstride13, I, npad13, H, 1, d_al13, d_ids, d_x, d_gu, M, G,
                           E, ready | DSV4C_W13_ROWS, limit, d_h, st);
    path = 1;
  }
  if (r == DSV4C_ERR_SHAPE && streamOK && (form == 0 || form == 2 || form == 3)) {
    r = dsv4c_qgemv_stream(fmt, d_w13, d_s13, wstride13, sstride13, I, npad13, H, 1, d_al13, d_ids, d_x, d_gu, M,
                           2 * G, E, ready | DSV4C_W13_PAIRS, 0, nullptr, st);
    path = form != 0 ? form : M < 3 ? 2 : 3;
    if (r == 0 && path == 2) {
      moe_path.store(2, std::memory_order_relaxed);
      return dsv4c_qgemm_grouped_swiglu(fmt, d_w2, d_s2, wstride2, sstride2, H, npad2, I, 1, d_al2, d_ids, d_gu,
                                        d_y, M, G, E, accumulate, limit, stream);
    }
    if (r == 0) r = dsv4c_swiglu(nullptr, d_h, d_gu, d_gu + n, (long long)n, limit, stream);
  }
  if (r == DSV4C_ERR_SHAPE) {
    path = 4;
    r = dsv4c_qgemm_grouped(fmt, d_w13, d_s13, wstride13, sstride13, I, npad13, H, 1, d_al13, d_ids, d_x, d_gu, M,
                            G, E, ready, stream);
    if (r == 0)
      r = dsv4c_qgemm_grouped(fmt, (const uint8_t *)d_w13 + (size_t)E * wstride13,
                              (const uint8_t *)d_s13 + (size_t)E * sstride13, wstride13, sstride13, I, npad13, H, 1,
                              d_al13 ? d_al13 + E : nullptr, d_ids, d_x, d_gu + n, M, G, E, ready, stream);
    if (r == 0) r = dsv4c_swiglu(nullptr, d_h, d_gu, d_gu + n, (long long)n, limit, stream);
  }
  moe_path.store(path, std::memory_order_relaxed);
  if (r != 0) return r;
  return dsv4c_qgemm_grouped(fmt, d_w2, d_s2, wstride2, sstride2, H, npad2, I, 1, d_al2, d_ids, d_h, d_y, M, G, E,
                             accumulate, stream);
}
