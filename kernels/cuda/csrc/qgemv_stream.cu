// qgemv_stream.cu: the decode GEMV (M <= 16 tokens) written as one weight stream per warp,
// built to overlap with the kernel before it through programmatic dependent launch (PDL).
//
// y[M][N] = alpha * x[M][K] (bf16) . W[N][K]^T, W packed by kernels/cuda/pack.go (NVFP4,
// MXFP4 or FP8-block), the same contract and the same exact in-register dequantization as
// qgemm.cu (qgemm_common.cuh: decode_a feeds mma.sync m16n8k16 with weights as the A operand).
//
// Why: in a decode step every GEMV reads a few MB to a few tens of MB of weights once, and a
// kernel that starts reading only when the previous one has finished pays a fixed cost per
// launch (grid launch, first HBM round trip, drain) that is as long as streaming a whole
// expert matrix. tools/cuda_ceiling.cu measured that even a kernel that only reads reaches
// 40 % of the copy bandwidth on 4.7 MB and 70 % on 18.9 MB when launches are serialized, and
// 97 % when each launch issues its reads before waiting for the previous grid. Weights never
// depend on the previous kernel, so this kernel issues them first:
//  - a grid of at most two blocks of 8 warps per SM (one wave); each warp owns a fixed list
//    of 16-row x 128-input units (one row tile's K-slice, or several whole row tiles) and
//    streams them through its own DEPTH-deep cp.async ring in shared memory, with no block
//    barrier in the loop; the first units (FP4: 2, 1 when a warp streams at most 2, all when
//    it streams 3 or 4, at most DEPTH - UP; FP8-block: DEPTH - UP) are issued before
//    griddepcontrol.wait (launched with the programmatic-dependent-launch attribute, the next
//    GEMV's grid is scheduled once this one's blocks have staged x, or at their wait, and
//    starts streaming as this one's blocks retire), the rest of the ring right after x is
//    staged;
//  - x (the previous kernel's output) is read only after the wait, once per block into
//    shared memory. Its loads complete only after the weight loads issued before them, and
//    no MMA can start without x: issuing the whole ring first left the decode idle for most
//    of the stream (Nsight Compute: 20 % of warp stalls on x; 2 units first: +17 % on wq_b);
//  - UP = 2 units are decoded side by side per loop step, four accumulator sets break the
//    MMA dependency chains; the steps of one ring cycle are unrolled, so ring slots are
//    constant offsets, and the issue side advances by pointer increments: the FP4 decode is
//    instruction-bound on sm_90 (no FP4 conversion instruction), so every instruction
//    outside the E2M1 -> bf16 arithmetic counts (BENCHMARKS.md, "CUDA (H200)"); for one
//    matrix, a warp's last step multiplies its two units one at a time, each as it lands;
//  - K-slices of a row tile are reduced in shared memory at the end (fixed order), whole row
//    tiles are stored as soon as they are done. A matrix with too few row tiles to give half
//    the SMs a block (wkv: 32) splits K over a thread-block cluster instead, reduced through
//    distributed shared memory in rank order. No memset node, no atomics, deterministic;
//  - grouped launches (MoE experts, expert ids read on the device) use a balanced layout
//    (FLAT): each block owns a contiguous run of one expert's row tiles and its 8 warps split
//    their units evenly, so a warp may start or end inside a row tile; partial sums of a row
//    tile meet in shared memory and the warp holding its first chunk adds them in warp order.
//    After the ids, x's loads (small x) and 3 units go out before x is staged; when the caller
//    declares the ids ready (DSV4C_IDS_READY, dsv4cuda.h), the ids and up to 4 units (6 where
//    a warp streams 32 or more; as the ring allows: FP8-block 3, 4-deep FP4 rings 2) go out
//    before the wait, as for one matrix.
//    With DSV4C_X_SWIGLU (dsv4c_qgemm_grouped_swiglu) x is float32 gate / up rows and the block
//    stages their clamped SwiGLU as its bf16 x (the routed w2 straight after w1 / w3).
// The launcher declines (DSV4C_ERR_SHAPE) when x does not fit beside the rings (FP4: 8-deep,
// then 4-deep; FP8-block: 4-deep), or when the grid would leave half the SMs idle and no
// cluster size fixes it (grouped launches, no power-of-two split of the chunks, devices without
// clusters); qgemm.cu then uses its older kernels.
// Without the PDL attribute (DSV4GO_GEMV3_PDL=0) the griddepcontrol instructions are no-ops.
//
// Small FP4 matrices (one row tile per block in the layout above, i.e. at most twice as many row
// tiles as SMs or a cluster split, and at most 4 units per K-slice warp: expert w1/w3 and w2,
// wkv) go to qgemv_predec_kernel instead (below): there the launch is a latency chain, not a
// stream, and it moves the weights' decode ahead of the wait as well.
// x is not declared __restrict__ in either kernel: ptxas may hoist read-only (ld.global.nc)
// loads above griddepcontrol.wait, where x may still be being written (it did for the
// predecode kernel; tools/cuda_sass_check.sh, run by .ci/cuda-build, checks the machine code).
#include <cuda_bf16.h>
#include <atomic>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "dsv4cuda.h"
#include "qgemm_common.cuh"
#include "qgemv_stream.h"

namespace {

// The decode kernel family of the last launch (dsv4c_gemv_path; a test hook).
std::atomic<int> gemv_path{0};

// Timeline probes: tools/cuda_stream_trace.cu includes this file with DSV4_STREAM_TRACE defined
// and reads per-block timestamps; the library build compiles them out.
#ifdef DSV4_STREAM_TRACE
__device__ unsigned long long *g_trace;
__device__ unsigned g_trace_n, g_trace_cap; // records used, records the buffer holds
#define TRACE_BEGIN(yp)                                                                        \
  unsigned long long *trace_rec = nullptr;                                                     \
  if (threadIdx.x == 0) {                                                                      \
    const unsigned slot = atomicAdd(&g_trace_n, 1u);                                           \
    trace_rec = g_trace + (size_t)min(slot, g_trace_cap - 1) * 8; /* overflow: last record */  \
    unsigned long long t;                                                                      \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));                                      \
    unsigned smid;                                                                             \
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));                                          \
    trace_rec[0] = (unsigned long long)(uintptr_t)(yp);                                        \
    trace_rec[1] = ((unsigned long long)smid << 32) | blockIdx.x;                              \
    trace_rec[2] = t;                                                                          \
  }
#define TRACE(i)                                                                               \
  if (threadIdx.x == 0) {                                                                      \
    unsigned long long t;                                                                      \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));                                      \
    trace_rec[i] = t;                                                                          \
  }
#else
#define TRACE_BEGIN(yp)
#define TRACE(i)
#endif

// Grouped launches (MoE experts): group z of G uses expert ids[z] (z when ids is NULL) of a
// stack of E weights wstride uint4 / sstride bytes apart, scaled by alphas[e] (if non-NULL),
// with its own x [M][K] and y [M][N] slices. bpg = blocks per group (a block never spans two
// groups). G = 1, ids = alphas = NULL for one matrix. cl > 1 (one matrix with one row tile
// per block only): each row tile's K is split over a thread-block cluster of cl blocks, whose
// partial sums rank 0 adds in rank order from its shared memory (distributed shared memory).
struct Groups {
  long long wstride, sstride;
  const float *alphas;
  const int *ids;
  int G, E, bpg, cl, lgcl; // cl = 1 << lgcl (device code shifts by lgcl, the launch needs cl)
  int early;                // ids (set only with them) complete before the previous launch began: read before the wait
  int swiglu;               // x is float32 [2][G][M][K] gate / up rows; stage their SwiGLU (FLAT)
  float limit;              // the SwiGLU's clamp (<= 0: none)
  int pairs;                // > 0: groups are w1 then w3 of `pairs` slots (DSV4C_W13_PAIRS, FLAT)
  __nv_bfloat16 *hout; // DSV4C_W13_ROWS (FLAT, FP4): bf16 SwiGLU(gate, up) [G][M][N] out, and each
                       // block streams the same rows of w1 and w3; else NULL
  __host__ __device__ bool rows2() const { return hout != nullptr; }
};

template <int FMT, int MT, int DEPTH, int UP, bool CLU, bool FLAT>
__global__ void __launch_bounds__(256, 2) // shared memory allows two blocks per SM anyway
    qgemv_stream_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles,
                        int K, float alpha, const __nv_bfloat16 *x,
                        float *__restrict__ y, int M, int N, int R, int lgkw, int accumulate, int probe,
                        int pre, int ldp, int split, Groups gp) {
  using U = Unit<FMT>;
  constexpr int WQ = U::WQ;
  static_assert(DEPTH % UP == 0 && UP <= 2, "the unrolled ring needs DEPTH a multiple of UP");
  static_assert(UP == 1 || DEPTH >= 2 * UP, "the split last step needs every unit issued before it");
  extern __shared__ uint4 smem[];

  TRACE_BEGIN(y);
  // Cluster launches: arrive at the cluster barrier now, wait on it before the first write into
  // another block's shared memory (distributed shared memory may be accessed only once every
  // block of the cluster has started); the wait is long satisfied by then.
  if constexpr (CLU) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int KW = 1 << lgkw, RW = 8 >> lgkw;
  const int kw = warp >> (3 - lgkw), rw = warp & (RW - 1);
  const int nch = K / 128, KT = K / 64;
  // this warp's row tiles: rt0, rt0 + RW, ... below rtEnd; its chunks: c0 .. c0 + ncw - 1
  // CLU: cluster split-K (a separate instantiation: the cluster arithmetic cost the other
  // launches 1-3 %, same call)
  const int cr = CLU ? (int)blockIdx.x & (gp.cl - 1) : 0; // rank in the cluster
  const int bx = CLU ? (int)blockIdx.x >> gp.lgcl : (int)blockIdx.x;
  const int grp = bx / gp.bpg, bl = bx - grp * gp.bpg;
  // DSV4C_W13_PAIRS: group grp is w1 (first half) or w3 (second half) of slot `slot`, whose id
  // and x both halves share; the stack holds every w1, then every w3 (E each)
  const int half = gp.pairs > 0 && grp >= gp.pairs, slot = grp - half * gp.pairs;
  int e;
  // ids declared ready (written before the previous launch began): read before the wait, by a
  // load coherent at device scope (never served from a stale L1 line, never taken for a
  // read-only load), so that the weight loads below can go out before the wait too.
  if (gp.early) // (set only with ids)
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(e) : "l"(gp.ids + slot) : "memory");
  else
    e = group_expert(gp.ids, slot);
  if (e < 0 || e >= gp.E) { // invalid expert id: group left untouched (uniform per block)
    // Every block waits for the previous grid before it exits: otherwise a grid of skipped
    // groups could complete before its predecessor, and the next launch's wait, which covers
    // only this grid, would not cover that predecessor.
    if (gp.early) asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }
  e += half * gp.E;
  w += (size_t)e * gp.wstride;
  sc += (size_t)e * gp.sstride;
  const float alpha3 = gp.rows2() && gp.alphas ? alpha * gp.alphas[e + gp.E] : alpha; // DSV4C_W13_ROWS: w3's
  if (gp.alphas) alpha *= gp.alphas[e];
  if (!gp.swiglu) x += (size_t)slot * M * K; // (swiglu: float32 rows, offset where staged)
  y += (size_t)grp * M * N;
  // FLAT (balanced launches, see the launcher): the block owns row tiles ta .. tb-1 of its
  // group, whose units (row tile, chunk) are contiguous in memory in that order; warp w streams
  // units ua .. ub-1 of them (counted from the block's first), cut at whole UP-unit steps, so a
  // warp may start and end inside a row tile. P: the block's steps.
  // DSV4C_W13_ROWS: the block's row tiles ta .. ta+n1-1 of w1, then the same of w3 (tiles ta+n1
  // .. ta+2*n1-1 here; the issue side jumps to w3 after the first n1).
  int rt0, rtEnd, c0, ncw, nu, ta = 0, P = 0, n1 = 0;
  if constexpr (FLAT) {
    ta = (int)((long long)bl * ntiles / gp.bpg);
    rtEnd = (int)((long long)(bl + 1) * ntiles / gp.bpg);
    if (gp.rows2()) {
      n1 = rtEnd - ta;
      rtEnd += n1;
    }
    P = (rtEnd - ta) * nch / UP;
    const int ua = warp * P / 8 * UP, ub = (warp + 1) * P / 8 * UP;
    rt0 = ta + ua / nch;
    c0 = ua % nch;
    ncw = nch;
    nu = ub - ua;
  } else {
    rt0 = bl * R + rw;
    rtEnd = min(ntiles, (bl + 1) * R);
    const int nrt = rt0 < rtEnd ? (rtEnd - rt0 + RW - 1) / RW : 0;
    const int nchb = CLU ? nch >> gp.lgcl : nch, cb = cr * nchb; // this block's chunks: cb .. cb + nchb - 1
    const int pc = (nchb + KW - 1) >> lgkw;
    c0 = cb + kw * pc;
    ncw = max(0, min(cb + nchb, c0 + pc) - c0);
    nu = nrt * ncw; // warp-uniform
  }
  uint8_t *const ring = reinterpret_cast<uint8_t *>(smem) + (size_t)warp * DEPTH * U::SLOT;

  // Issue side: the next unit's source pointers (this lane's pieces) and how many units are
  // left. A warp's units are contiguous in memory up to a jump: every ncw units to the next
  // row tile (jw, js; power-of-two layout), or once, after the block's w1 rows, to its w3 rows
  // (DSV4C_W13_ROWS; the balanced layout has no other jump). tleft counts the units to the
  // next jump. Every issue steps the pointers and counters and predicates its copies on a unit
  // being left (no branch): past the warp's last unit the pointers run on but nothing is read.
  // No division, no 64-bit multiply and no slot arithmetic in the loop: ring slots are
  // compile-time constants of the unrolled phases below. Against a per-row-tile counter and a
  // branch per unit (and the probe's test per step, now compiled out), same call (2026-12-01
  // 03:34, tools/cuda_stream_trace.cu, NVFP4 routed layer): 26.21-26.31 against 28.30-28.53 us
  // at 1 token, 87.14-87.23 against 90.45-90.89 at 4; a loop step (2 units) 456 instructions
  // against 501.
  const uint4 *wi = w + ((size_t)rt0 * KT + 2 * c0) * (32 * WQ) + lane;
  const uint8_t *si = sc + ((size_t)rt0 * nch + c0) * U::SBYTES + lane * 16;
  long long jw = FLAT ? 0 : ((long long)RW * KT - 2 * ncw) * (32 * WQ);
  long long js = FLAT ? 0 : ((long long)RW * nch - ncw) * U::SBYTES;
  int lefti = nu, tleft = FLAT ? 0x7fffffff : ncw, treset = FLAT ? 0x7fffffff : ncw;
  if (FLAT && gp.rows2()) {
    jw = (long long)gp.E * gp.wstride - (long long)n1 * KT * 32 * WQ;
    js = (long long)gp.E * gp.sstride - (long long)n1 * nch * U::SBYTES;
    if (rt0 >= ta + n1) { // the warp starts in w3's rows
      wi += jw;
      si += js;
    } else {
      tleft = (ta + n1 - rt0) * nch - c0;
    }
  }
  const bool slane = U::SBYTES != 0 && lane < U::SBYTES / 16; // the lanes that copy scales
  // unit: the copies of the unit at wi + k units into ring slot `slot`, one cp.async group;
  // empty past the warp's last unit (live false), so that the wait count stays uniform
  auto unit = [&](int slot, int k, bool live) {
    uint8_t *const d = ring + slot * U::SLOT;
#pragma unroll
    for (int i = 0; i < 2 * WQ; i++) cp_async16_if(d + (i * 32 + lane) * 16, wi + k * 64 * WQ + i * 32, live);
    if constexpr (U::SBYTES != 0) cp_async16_if(d + U::WBYTES + lane * 16, si + k * U::SBYTES, live && slane);
    cp_commit();
  };
  // advance: the pointers and counters past n units
  auto advance = [&](int n) {
    lefti -= n;
    wi += n * 64 * WQ;
    si += n * U::SBYTES;
    if ((tleft -= n) == 0) {
      tleft = treset;
      wi += jw;
      si += js;
    }
  };
  // issue: the prologue's, one unit into ring slot `slot` (0 .. DEPTH-1)
  auto issue = [&](int slot) {
    unit(slot, 0, lefti > 0);
    advance(1);
  };
  // issue_step: the loop's refill, UP units into the slots the previous step freed (s0 - UP ..
  // s0 - 1, mod DEPTH) under one predicate and one pointer step, a group per unit. Valid
  // because the units left and the units to the next jump are multiples of UP at every step:
  // UP = 2 only where a warp's chunk runs are even (the launcher's pair), the balanced layout
  // cuts warps at whole steps, and the prologue issues DEPTH - UP units. The split last step
  // (below) relies on the same: a warp's unit count nu is a multiple of UP.
  auto issue_step = [&](int s0) {
    const bool live = lefti > 0;
#pragma unroll
    for (int k = 0; k < UP; k++) unit((s0 + DEPTH - UP + k) % DEPTH, k, live);
    advance(UP);
  };

  // Only the first pre units go out before the wait: x is read right after it, and its
  // loads complete only after the weight loads issued ahead of them (measured: with all
  // DEPTH - UP units ahead, x arrived late enough to idle the decode; BENCHMARKS.md).
  // Grouped launches read the expert ids after the wait (group_expert, above) unless declared
  // ready (gp.early, balanced layout only: then as for one matrix, pre units before the wait,
  // and the alphas are read before it as well): the power-of-two
  // layout issues nothing before x is staged, the balanced one (FLAT) its first pre & 255
  // units, and with pre & 256, when x is at most XF 16-byte pieces per thread (M x K <= 8192:
  // expert w1/w3 at M <= 2, w2 at M <= 4), its loads of x ahead of them, so that x arrives
  // first and the stream starts at once; larger x is staged after those units.
  constexpr int XF = 4;
  uint4 xr[XF];
  const int segs = K / 8;
  const bool xf = FLAT && gp.ids && (pre & 256) && M * segs <= XF * 256;
  if constexpr (FLAT) {
    if (xf) {
      // group_expert waited already (xf needs expert ids); stated again so that no path reads
      // x before the previous grid is complete (the wait returns at once the second time)
      asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
      for (int r = 0; r < XF; r++) {
        const int i = threadIdx.x + r * 256;
        if (i < M * segs) {
          const int row = i / segs, seg = i - row * segs;
          xr[r] = *reinterpret_cast<const uint4 *>(x + (size_t)row * K + seg * 8);
        }
      }
    }
  }
  const int mypre = !FLAT ? (gp.ids ? 0 : pre) : pre & 255;
#pragma unroll
  for (int i = 0; i < DEPTH - UP; i++)
    if (i < mypre) issue(i);
  // Weights, scales and alphas are uploaded once and never written by a kernel: they are
  // read before this wait. x (and y when accumulating) may come from the previous kernel.
  // The next grid may be scheduled here (ldp 0) or once x is staged (ldp 1: its blocks'
  // weight loads then do not queue ahead of this block's remaining ones; see the launcher).
  if (ldp == 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  TRACE(3);

  // x -> shared memory once per block (rows padded by 16 bytes: conflict-free B fragments),
  // through registers so that the cp.async groups of the weight ring stay untouched. Token
  // rows past M read a zero strip after x instead (stride 0): the B loads carry no predicate.
  const int XR = K + 8;
  __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(reinterpret_cast<uint8_t *>(smem) + (size_t)8 * DEPTH * U::SLOT);
  __nv_bfloat16 *zs = xs + M * XR; // ZSTRIP zero bf16
  {
    if (FLAT && xf) {
#pragma unroll
      for (int r = 0; r < XF; r++) {
        const int i = threadIdx.x + r * 256;
        if (i < M * segs) {
          const int row = i / segs, seg = i - row * segs;
          *reinterpret_cast<uint4 *>(xs + row * XR + seg * 8) = xr[r];
        }
      }
    } else if (FLAT && gp.swiglu) {
      // x = SwiGLU(gate, up) of this group's float32 rows (the w1 / w3 launch's outputs),
      // made here so that no launch sits between that launch and this one
      const float *gx = reinterpret_cast<const float *>(x) + (size_t)grp * M * K;
      const float *ux = gx + (size_t)gp.G * M * K;
      for (int i = threadIdx.x; i < M * segs; i += 256) {
        const int row = i / segs, seg = i - row * segs;
        const size_t o = (size_t)row * K + seg * 8;
        const float4 g0 = *reinterpret_cast<const float4 *>(gx + o), g1 = *reinterpret_cast<const float4 *>(gx + o + 4);
        const float4 u0 = *reinterpret_cast<const float4 *>(ux + o), u1 = *reinterpret_cast<const float4 *>(ux + o + 4);
        *reinterpret_cast<uint4 *>(xs + row * XR + seg * 8) = swiglu8(g0, g1, u0, u1, gp.limit);
      }
    } else {
      for (int i = threadIdx.x; i < M * segs; i += 256) {
        const int row = i / segs, seg = i - row * segs;
        *reinterpret_cast<uint4 *>(xs + row * XR + seg * 8) = *reinterpret_cast<const uint4 *>(x + (size_t)row * K + seg * 8);
      }
    }
    for (int i = threadIdx.x; i < ZSTRIP / 8; i += 256) reinterpret_cast<uint4 *>(zs)[i] = make_uint4(0, 0, 0, 0);
    __syncthreads();
  }
  TRACE(4);
  if (ldp == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#pragma unroll
  for (int i = 0; i < DEPTH - UP; i++)
    if (i >= mypre) issue(i);

  // Four accumulator sets (one per k16 step of a 64-input tile): the 8 MMAs of a unit form
  // four independent chains instead of one, so their latency overlaps. Summed before a store.
  float acc[4][MT][4] = {};
  auto total = [&](float (&out)[1][MT][4]) {
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int k = 0; k < 4; k++) out[0][n][k] = (acc[0][n][k] + acc[1][n][k]) + (acc[2][n][k] + acc[3][n][k]);
  };
  const __nv_bfloat16 *xl[MT]; // this lane's B row per token tile, and its per-chunk stride
  int xstr[MT];
#pragma unroll
  for (int n = 0; n < MT; n++) {
    const bool real = n * 8 + g < M;
    xl[n] = (real ? xs + (n * 8 + g) * XR : zs) + 16 * t;
    xstr[n] = real ? 128 : 0;
  }
  const int sOff = FMT == DSV4C_FMT_NVFP4 ? lane * 4 : g * 8 + (t >> 1) * 4;
  int rtc = rt0, cc = c0;
  const int cEnd = FLAT ? nch : c0 + ncw;
  // FLAT: a warp's partial sum of a row tile it entered past chunk 0 goes to its slot here
  // (after x's zero strip; slot warp - 1: warp 0 starts at the block's first unit and never
  // leaves one), for the warp that holds the tile's chunk 0 to add (below).
  float *const red = reinterpret_cast<float *>(zs + ZSTRIP);
  // DSV4C_W13_ROWS: the block's gate rows then up rows, [2 * n1 * 16][M] float32, past the slots
  float *const hs = red + 7 * MT * 4 * 32;
  // put stores a finished row tile: to y, or (DSV4C_W13_ROWS) scaled by w1's or w3's alpha to hs
  auto put = [&](const float (&v)[1][MT][4], int rt) {
    if (FLAT && gp.rows2()) {
      const float a = rt < ta + n1 ? alpha : alpha3;
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
          const int tok = n * 8 + 2 * t + (q & 1);
          if (tok < M) hs[((rt - ta) * 16 + g + ((q >> 1) << 3)) * M + tok] = v[0][n][q] * a;
        }
    } else {
      store_acc<1, MT>(v, rt, ntiles, 0, alpha, y, N, M, N, lane, false, accumulate != 0);
    }
  };
  auto to_slot = [&](const float (&v)[1][MT][4]) {
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int k = 0; k < 4; k++) red[(((warp - 1) * MT + n) * 4 + k) * 32 + lane] = v[0][n][k];
  };

  // load: unit k of a step, whose ring slot is at `slot`, into tw[k] and sw[k]
  auto load = [&](const uint8_t *slot, int k, uint4 (&tw)[UP][2 * WQ], uint32_t (&sw)[UP]) {
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int i = 0; i < WQ; i++)
        tw[k][h * WQ + i] = *reinterpret_cast<const uint4 *>(slot + ((h * 32 + lane) * WQ + i) * 16);
    if (FMT == DSV4C_FMT_FP8B)
      sw[k] = __ldg(sc + (size_t)(rtc >> 3) * nch + cc + k);
    else
      sw[k] = *reinterpret_cast<const uint32_t *>(slot + U::WBYTES + sOff);
  };
  // math: decode units k0 .. k1-1 of a step and multiply them into the accumulators (k0, k1
  // are constants once inlined)
  auto math = [&](const uint4 (&tw)[UP][2 * WQ], const uint32_t (&sw)[UP], int k0, int k1) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint32_t bx[UP][MT][8];
#pragma unroll
      for (int n = 0; n < MT; n++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(xl[n] + cc * xstr[n] + h * 64);
#pragma unroll
        for (int k = k0; k < k1; k++) {
          const uint4 lo = src[k * 16], hi = src[k * 16 + 1]; // +k*128, +k*128+8 bf16
          bx[k][n][0] = lo.x; bx[k][n][1] = lo.y; bx[k][n][2] = lo.z; bx[k][n][3] = lo.w;
          bx[k][n][4] = hi.x; bx[k][n][5] = hi.y; bx[k][n][6] = hi.z; bx[k][n][7] = hi.w;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        uint32_t a[UP][4];
#pragma unroll
        for (int k = k0; k < k1; k++) decode_a<FMT, true>(&tw[k][h * WQ], sw[k], h, j, a[k]);
#pragma unroll
        for (int k = k0; k < k1; k++)
#pragma unroll
          for (int n = 0; n < MT; n++) mma16816(acc[j][n], a[k], bx[k][n][2 * j], bx[k][n][2 * j + 1]);
      }
    }
  };
  // done: past a step's UP chunks; store the row tile they completed, if any
  auto done = [&]() {
    cc += UP;
    if (cc == cEnd) { // the warp's part of row tile rtc is done
      if (FLAT || KW == 1) {
        float sum[1][MT][4];
        total(sum);
        if (FLAT && rtc == rt0 && c0 != 0)
          to_slot(sum); // entered past chunk 0: another warp adds it
        else
          put(sum, rtc);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
          for (int n = 0; n < MT; n++)
#pragma unroll
            for (int k = 0; k < 4; k++) acc[j][n][k] = 0.f;
      }
      cc = FLAT ? 0 : c0;
      rtc += FLAT ? 1 : RW;
    }
  };

  // one loop step: wait for the UP units in slots s0 .. s0+UP-1, refill the UP slots freed by
  // the previous step, decode and multiply.
  auto step = [&](int s0) {
    cp_wait<DEPTH - 2 * UP>();
    __syncwarp(); // every lane's pieces of these units are visible; the last ones' slots are free
    issue_step(s0);
    uint4 tw[UP][2 * WQ];
    uint32_t sw[UP];
#pragma unroll
    for (int k = 0; k < UP; k++) load(ring + (s0 + k) * U::SLOT, k, tw, sw);
#ifdef DSV4_STREAM_PROBE
    // benchmark probe (DSV4GO_GEMV3_PROBE=1, in builds that define DSV4_STREAM_PROBE only: its
    // test costs every step 5 instructions): stream the ring, skip the math
    if (probe) {
      acc[0][0][0] += __uint_as_float((tw[0][0].x ^ tw[UP - 1][1].y ^ sw[0]) & 0x3f7fffffu);
    } else
#endif
      math(tw, sw, 0, UP);
    done();
  };
  // The ring cycles through its DEPTH slots every DEPTH / UP steps: unrolled, so that every
  // slot address is a constant offset from ring.
  // split (UP = 2, one matrix): the warp's last step is taken out of the loop and multiplies
  // its two units one at a time, the first as soon as it has landed. When the last bytes land
  // every warp still holds a step; a bound probe that skipped that step's math cut a lone
  // launch by 0.6 us (BENCHMARKS.md, session 18). Its slot is found at run time (one step);
  // nothing is left to issue by then (the units before the wait and the refills have covered
  // all nu), so the waits count the groups the invariant of step() leaves: DEPTH - 2 UP after
  // this step's two. Same call (2026-12-01 09:38, cudabench, NVFP4 at M = 1 / 4 / 16, us):
  // wq_b 6.71 / 6.98 / 8.45 against 6.85 / 7.10 / 8.58, wo_b 7.22 / 8.12 / 11.16 against 7.36
  // / 8.19 / 11.03; MXFP4 alike. In the balanced layout (FLAT) it lost: the routed layer at 4
  // tokens 88.43 against 86.91 us (Stream.MoE), so it is compiled out there. The split adds
  // each MMA accumulator's four products of the step in another order (unit by unit instead of
  // half by half), so SPLIT=0 and 1 may differ in the last float32 bits; each is deterministic.
  const int nloop = !FLAT && split && UP == 2 && nu > 0 ? nu - UP : nu;
  for (int u = 0; u < nloop; u += DEPTH) {
#pragma unroll
    for (int s0 = 0; s0 < DEPTH; s0 += UP)
      if (u + s0 < nloop) step(s0);
  }
  if constexpr (UP == 2 && !FLAT) {
    if (nloop < nu) {
      const uint8_t *slot = ring + ((nu - UP) % DEPTH) * U::SLOT;
      uint4 tw[UP][2 * WQ];
      uint32_t sw[UP];
      cp_wait<DEPTH - 2 * UP + 1>();
      __syncwarp();
      load(slot, 0, tw, sw);
      math(tw, sw, 0, 1);
      cp_wait<DEPTH - 2 * UP>();
      __syncwarp();
      load(slot + U::SLOT, 1, tw, sw);
      math(tw, sw, 1, 2);
      done();
    }
  }
  cp_wait<0>();
#ifdef DSV4_STREAM_TRACE
  __syncthreads(); // the block's end, not warp 0's, when warps own whole row tiles
#endif
  TRACE(5);
  if constexpr (FLAT) {
    // The row tile the warp's units end inside (if any): a warp that entered it past chunk 0
    // leaves its sum in its slot; the one holding its chunk 0 adds the later warps' slots in
    // warp order (deterministic) and stores. Row tiles the warp covers whole were stored above.
    const bool pend = nu > 0 && cc != 0;
    float part[1][MT][4];
    total(part);
    const bool give = pend && rtc == rt0 && c0 != 0;
    if (give) to_slot(part);
    __syncthreads();
    if (pend && !give) {
      const int tend = (rtc + 1 - ta) * nch; // the tile's end, in units from the block's first
      for (int j = warp + 1; j < 8; j++) {
        const int ja = j * P / 8 * UP, jb = (j + 1) * P / 8 * UP;
        if (ja >= tend) break;
        if (ja == jb) continue;
#pragma unroll
        for (int n = 0; n < MT; n++)
#pragma unroll
          for (int k = 0; k < 4; k++) part[0][n][k] += red[(((j - 1) * MT + n) * 4 + k) * 32 + lane];
        if (jb >= tend) break;
      }
      put(part, rtc);
    }
    if (gp.rows2()) {
      // DSV4C_W13_ROWS: bf16(SwiGLU(gate, up)) of the block's rows, from shared memory
      __syncthreads(); // the adders' tiles are in hs
      const int r0 = ta * 16, nr = min(n1 * 16, N - r0);
      __nv_bfloat16 *hz = gp.hout + (size_t)slot * M * N;
      for (int i = threadIdx.x; i < M * nr; i += 256) {
        const int tok = i / nr, r = i - tok * nr;
        hz[(size_t)tok * N + r0 + r] = swiglu_bf16(hs[r * M + tok], hs[(n1 * 16 + r) * M + tok], gp.limit);
      }
    }
#ifdef DSV4_STREAM_TRACE
    __syncthreads(); // the block's last store
#endif
    TRACE(7);
    return;
  }
  if (KW == 1) return;

  // K-slices: one row tile per warp column (R == RW); reduce in fixed order through shared
  // memory past x.
  float part[1][MT][4];
  total(part);
  if (kw > 0) {
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int k = 0; k < 4; k++) red[(((kw - 1) * RW + rw) * MT * 4 + n * 4 + k) * 32 + lane] = part[0][n][k];
  }
  __syncthreads();
  // the lead warp (K-slice 0) of each row tile adds the other K-slices in slice order
  const bool lead = kw == 0 && rt0 < rtEnd;
  if (lead) {
    for (int s = 1; s < KW; s++) {
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int k = 0; k < 4; k++) part[0][n][k] += red[(((s - 1) * RW + rw) * MT * 4 + n * 4 + k) * 32 + lane];
    }
  }
  if constexpr (!CLU) {
    if (!lead) return;
    store_acc<1, MT>(part, rt0, ntiles, 0, alpha, y, N, M, N, lane, false, accumulate != 0);
  } else {
    // Cluster split-K (one row tile per block, RW == 1): the lead warp of ranks 1 .. cl-1
    // writes its block's sum into rank 0's scratch past red, every thread of the cluster meets
    // at the cluster barrier (release / acquire), and rank 0 adds them in rank order:
    // deterministic, no atomics, y written once.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float *cred = red + 7 * RW * MT * 4 * 32;
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); // the arrive at the top
    if (lead && cr > 0) {
      float *dst = cluster.map_shared_rank(cred, 0);
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int k = 0; k < 4; k++) dst[((cr - 1) * MT * 4 + n * 4 + k) * 32 + lane] = part[0][n][k];
    }
    cluster.sync();
    TRACE(6);
    if (!lead || cr > 0) return;
    for (int s = 1; s < gp.cl; s++) {
#pragma unroll
      for (int n = 0; n < MT; n++)
#pragma unroll
        for (int k = 0; k < 4; k++) part[0][n][k] += cred[((s - 1) * MT * 4 + n * 4 + k) * 32 + lane];
    }
    store_acc<1, MT>(part, rt0, ntiles, 0, alpha, y, N, M, N, lane, false, accumulate != 0);
  }
  TRACE(7);
}

// Knobs (benchmarks): DSV4GO_GEMV3_DEPTH=2 picks the deeper ring (below), DSV4GO_GEMV3_UP=1
// one unit per loop iteration, DSV4GO_GEMV3_SPLIT=0 keeps the warp's last step whole (one
// matrix), DSV4GO_GEMV3_PRE = units issued before the wait (at most the
// ring's DEPTH - UP), DSV4GO_GEMV3_PDL=0 launches without the
// programmatic-dependent-launch attribute; DSV4GO_GEMV3_BPS = target blocks per SM (2: the
// grid is one wave of two blocks per SM; the next grid's blocks start as these retire);
// DSV4GO_GEMV3_LD = where the next grid is scheduled (0: at the wait, 1: once x is staged);
// DSV4GO_GEMV3_CL = cluster size for K splits (1: none); DSV4GO_GEMV3_SMALL=0: no 4-deep rings;
// grouped launches: DSV4GO_GEMV3_FLAT=0 the power-of-two layout instead of the balanced one,
// DSV4GO_GEMV3_GPRE = units issued after the expert ids and before x is staged (balanced
// layout), DSV4GO_GEMV3_GXF=0 x's loads after those units instead of before; with ids declared
// ready (DSV4C_IDS_READY) DSV4GO_GEMV3_RPRE = units issued before the wait, DSV4GO_GEMV3_READY=0
// ignores the declaration.
// Shared memory of one block: the 8 warp rings, x (M rows of K + 8 bf16) and slots of partial
// sums (one warp's accumulators each): 7 + cl - 1 with K-slices (the other slices' and, in a
// cluster, the other ranks'), 7 in the balanced layout (every warp but the first), else none.
// At most STREAM_SMEM_MAX (two blocks per SM on sm_90's 228 KB) and the device's opt-in
// limit; when x does not fit beside the rings (large M x K) the launcher tries 4-deep rings,
// then declines and the caller uses the older decode kernels.
constexpr int STREAM_SMEM_MAX = 112 * 1024;
template <int FMT, int MT, int DEPTH> size_t stream_smem(int M, int K, int slots) {
  const size_t red = (size_t)slots * MT * 4 * 32 * sizeof(float);
  return (size_t)8 * DEPTH * Unit<FMT>::SLOT + ((size_t)M * (K + 8) + ZSTRIP) * 2 + red;
}

// Launch is a cudaLaunchKernelEx configuration of a decode GEMV grid: 256 threads per block,
// smem bytes of dynamic shared memory, the programmatic-dependent-launch attribute when pdl and
// thread-block clusters of cl blocks when cl > 1. Not copyable: cfg points at its own attrs.
struct Launch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  Launch(unsigned grid, size_t smem, cudaStream_t st, bool pdl, int cl) {
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    int na = 0;
    if (pdl) pdl_attr(attr[na++]);
    if (cl > 1) cluster_attr(attr[na++], cl);
    cfg.attrs = attr;
    cfg.numAttrs = na;
  }
  Launch(const Launch &) = delete;
  Launch &operator=(const Launch &) = delete;
};

// launch_cl is the cluster size a launch of grid blocks that does not split K over a cluster
// asks for: def, or n with DSV4GO_GEMV3_CLA=n (a benchmark knob), where it divides the grid, else
// 1. The blocks do not use the cluster; being launched in clusters changes where they are placed.
inline int launch_cl(long long grid, int def) {
  static const int cla = env_int("DSV4GO_GEMV3_CLA", 0);
  const int n = cla > 0 ? cla : def;
  return n > 1 && n <= 8 && grid % n == 0 ? n : 1;
}

// cluster_fits returns 0 if the current device can make at least one cluster of cl blocks of
// kern resident, each with smem bytes of dynamic shared memory (call it with the most the kernel
// may ask for), else DSV4C_ERR_SHAPE, so that the caller declines instead of failing the launch
// on a device where such clusters do not fit (max_clusters, cached in cache). On the H200 the
// checked cluster launches ran (TestGEMVPath, run V: clusters of 2 and 4, checked at 112 KB per
// block).
template <typename Kern> int cluster_fits(std::atomic<int> (&cache)[64][3], Kern kern, int cl, int smem) {
  Launch lc(cl, smem, nullptr, false, 1);
  return max_clusters(kern, lc.cfg, cl, cache) >= 1 ? 0 : DSV4C_ERR_SHAPE;
}

template <int FMT, int MT, int DEPTH, int UP, bool CLU, bool FLAT = false>
int launch_depth(int upw, const void *w, const void *sc, int ntiles, int K, float alpha, const void *x,
                 float *y, int M, int N, int R, int lgkw, int accumulate, const Groups &gp,
                 cudaStream_t st, size_t extra = 0) {
  // extra: DSV4C_W13_ROWS's gate / up rows past the slots
  const int cap = min(STREAM_SMEM_MAX, smem_optin_max());
  // Two blocks per SM, never three: the grids are sized for two per SM (bps; the balanced
  // layout's slots), and a third resident block takes an uneven share. The shared memory
  // request is raised where registers and the rings would let a third block in (FP8-block with
  // 80 registers: wq_b at M = 1 12.55 against 10.06 us, 2026-12-01 04:16). DSV4GO_GEMV3_TWO=0:
  // not raised (set it with DSV4GO_GEMV3_BPS > 2, whose grids expect more blocks per SM).
  static const bool two = env_int("DSV4GO_GEMV3_TWO", 1) != 0;
  const size_t smem = max(stream_smem<FMT, MT, DEPTH>(M, K, FLAT ? 7 : lgkw > 0 ? 7 + gp.cl - 1 : 0) + extra,
                          two ? (size_t)min(cap, smem_two_blocks()) : (size_t)0);
  if (smem > (size_t)cap) return DSV4C_ERR_SHAPE;
  auto kern = qgemv_stream_kernel<FMT, MT, DEPTH, UP, CLU, FLAT>;
  static DeviceOnce smemOptIn; // per instantiation and device
  if (int e = opt_in_smem(smemOptIn, kern, cap)) return e;
  static std::atomic<int> clusterFits[64][3]; // per device and cluster size 2, 4, 8
  if (CLU)
    if (int e = cluster_fits(clusterFits, kern, gp.cl, cap)) return e;
  static const bool pdl = env_int("DSV4GO_GEMV3_PDL", 1) != 0;
  static const int probe = env_int("DSV4GO_GEMV3_PROBE", 0);
  // the warp's last step split in two (one matrix, not with the math-off probe; the kernel's
  // `split`); DSV4GO_GEMV3_SPLIT=0: not
  static const bool split = env_int("DSV4GO_GEMV3_SPLIT", 1) != 0;
  // Where the next grid may be scheduled (DSV4GO_GEMV3_LD overrides): FP4 launches without
  // clusters, once x is staged (1): the next grid's first weight loads then queue behind this
  // grid's remaining ones instead of ahead of them. Timeline (tools/cuda_stream_trace.cu,
  // 2026-11-30 05:03): expert w1/w3 at M = 1 (one block per SM) ends its last block 3.6 us after
  // the wait instead of 4.0; cudabench, same call: w1/w3 4.20 against 4.53 us at M = 1, 4.67
  // against 5.13 at M = 4, every other shape within 1 %. Cluster launches (wkv: 3.65 against
  // 3.55 us) and FP8-block (not measured) keep 0: scheduled before the wait.
  static const int ldp_env = env_int("DSV4GO_GEMV3_LD", -1);
  const int ldp = ldp_env >= 0 ? ldp_env : (FMT != DSV4C_FMT_FP8B && !CLU) ? 1 : 0;
  // units issued before griddepcontrol.wait: for FP4 2 (measured best of 0..6 on wq_b, 8
  // units per warp), 1 when a warp streams at most 2 units (expert w2, 2 per warp, same call:
  // 3.62 against 3.87 us at M = 1, 3.81 against 4.24 us at M = 4: its x arrives sooner), all
  // of them when a warp streams 3 or 4 (expert w1/w3, 4 per warp, with ldp 1, same call 04:53:
  // 4.06 against 4.20 us at M = 1, 4.48 against 4.67 at M = 4); all DEPTH - UP for FP8-block
  // (its 2 KB units: 3 measured as good as 2). DSV4GO_GEMV3_PRE overrides.
  static const int pre_env = env_int("DSV4GO_GEMV3_PRE", -1);
  // Balanced grouped launches (FLAT with expert ids): x's first loads (pre & 256), then 3 units,
  // then x is staged. Same call (2026-11-30 12:04, NVFP4 M = 1, us; 12 w1/w3 matrices, 6 w2):
  // units 0 / 2 / 3 / 4 / 6 19.04 / 18.30 / 18.25 / 18.31 / 18.30 and 11.61 / 10.79 / 10.56 /
  // 10.64 / 10.70; x after the 3 units (DSV4GO_GEMV3_GXF=0) 18.58 and 11.15. FP8-block: within
  // 1 % from 2 units up.
  // With ids the caller declared ready (DSV4C_IDS_READY) the ids come before the wait as well,
  // and so do 4 units (no x first: x is the previous kernel's). Same call (2026-11-30 13:50,
  // NVFP4, us at M = 1 / 4; 12 w1/w3 matrices, 6 w2; ids after the wait: 18.18 / 19.21 and
  // 10.52 / 11.14): units 2 / 3 / 4 / 6 17.36 / 16.51 / 16.25 / 16.52 and 10.41 / 9.89 / 9.43
  // / 9.85 at M = 1; 16.80 and 9.76 at M = 4 with 4. Where a warp streams 32 units or more
  // (the routed launches of a batch of 2 or more tokens: 11 or more expert slots), 6: same call
  // (2026-12-01 10:23, cudabench routed rows, NVFP4, ids ready, two runs, us at 1 / 2 / 4 / 8 /
  // 16 tokens), Stream.MoE with 4 units 25.60 / 44.78 / 85.36 / 157.09 / 312.34 and 25.34 /
  // 44.68 / 85.13 / 156.79 / 312.38, with 6 26.01 / 43.45 / 83.61 / 154.65 / 312.07 and 26.01 /
  // 43.33 / 83.73 / 154.16 / 312.06; the w2 launch at 2 tokens (22 units per warp) 14.73 / 14.70
  // with 4 against 15.24 / 15.15 with 6, at 4 tokens (48) 29.41 / 29.53 against 28.29 / 28.31;
  // w1/w3 at 1 token (24) 15.73 / 15.72 against 15.77 / 15.70, at 2 (48) 27.82 / 27.71 against
  // 26.51 / 26.49. This rule against 4 everywhere, same call (10:28, two runs each, us at 1 / 2 /
  // 4 / 8 / 16 tokens): w1/w3 15.95 / 26.96 / 58.94 / 105.58 / 199.92 and 15.87 / 26.85 / 57.45
  // / 105.20 / 198.56 against 15.78 / 28.28 / 59.90 / 106.17 / 201.57 and 15.84 / 28.23 / 59.93
  // / 106.10 / 200.43; w2 9.42 / 14.84 / 28.93 / 55.46 / 105.47 and 9.34 / 14.94 / 29.91 / 55.21
  // / 105.16 against 9.34 / 14.97 / 30.14 / 56.69 / 106.13 and 9.33 / 14.88 / 30.18 / 56.47 /
  // 106.19; Stream.MoE 25.60 / 44.54 / 85.74 / 161.10 / 326.89 and 25.61 / 44.55 / 89.00 /
  // 160.68 / 330.86 against 25.60 / 45.47 / 87.52 / 161.22 / 325.39 and 25.72 / 45.41 / 87.19 /
  // 161.12 / 330.52 (its 4-token rows spread by 4 % between runs). DSV4GO_GEMV3_RPRE overrides.
  static const int gpre_env = max(0, env_int("DSV4GO_GEMV3_GPRE", 3));
  static const int rpre_env = env_int("DSV4GO_GEMV3_RPRE", -1);
  const int rpre = rpre_env >= 0 ? rpre_env : upw >= 32 ? 6 : 4;
  static const bool gxf = env_int("DSV4GO_GEMV3_GXF", 1) != 0;
  const int pre = (FLAT && gp.ids && !gp.early && !gp.swiglu && gxf ? 256 : 0) |
                  min(DEPTH - UP, FLAT && gp.ids          ? (gp.early ? rpre : gpre_env)
                                  : pre_env >= 0          ? pre_env
                                  : FMT == DSV4C_FMT_FP8B ? DEPTH - UP
                                  : upw <= 2              ? 1
                                  : upw <= 4              ? upw
                                                          : 2);
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  Launch lc(gp.G * gp.bpg * gp.cl, smem, st, pdl, CLU ? gp.cl : launch_cl((long long)gp.G * gp.bpg, 1));
  const int r = (int)cudaLaunchKernelEx(&lc.cfg, kern, (const uint4 *)w, (const uint8_t *)sc, ntiles, K,
                                       alpha, (const __nv_bfloat16 *)x, y, M, N, R, lgkw, accumulate,
                                       probe, pre, ldp, split && gp.G == 1 && !probe ? 1 : 0, gp);
  if (r == 0)
    gemv_path.store(gp.cl > 1 ? DSV4C_GEMV_STREAM_CLUSTER : gp.early ? DSV4C_GEMV_STREAM_READY : DSV4C_GEMV_STREAM,
                    std::memory_order_relaxed);
  return r;
}

// cluster_ok reports whether the current device launches thread-block clusters (compute
// capability 9.0 and later).
inline bool cluster_ok() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  return major >= 9;
}


// qgemv_predec_kernel serves one FP4 matrix at M <= 8 * MT (MT token tiles of 8) whose warps
// stream at most NU (<= 4) units each: expert w1/w3 (2048x4096: one row tile per block, 8 K-slice warps of 4 units),
// expert w2 (4096x2048: two row tiles per block, 4 K-slice warps each, 4 units) and wkv
// (512x4096: one row tile per cluster of 4 blocks, 1 unit per warp). For these the launch
// timeline of the streaming kernel (tools/cuda_stream_trace.cu, run T) is a serial chain after
// the previous grid completes: x staged (0.45-0.7 us), then the decode and MMAs of the warp's
// units (w1/w3: 1.95 us), then the K-slice reduction, while bandwidth would need ~1.1 us. Here
// the whole chain before the MMAs moves ahead of griddepcontrol.wait, where it overlaps the
// previous grid: every unit is issued at block start, units 0 .. PS-1 are decoded into shared
// memory as bf16 A fragments (4 KB per unit; the unit's packed bytes land in the tail of its
// own decoded slot) and units PS .. PS+PR-1 into registers (32 per lane per unit). The next
// grid is scheduled at block start (ldp 0; it needs the free half of each SM: one grid takes
// at most one block per SM, hence RW = 2 row tiles per block for w2). After the wait only x's
// loads (straight from global memory into B fragments: XM 1 per unit as the MMAs need them, XM
// 2 all of them first), the MMAs and the K-slice reduction remain.
// Shared memory per warp: PS decoded slots and NU - PS packed slots; the reduction reuses each
// warp's first decoded slot once its MMAs are done; a cluster's partial sums go past the warps'
// areas in rank 0. Registers: at most 128 per thread (two blocks per SM: this grid's and the
// next one's); every instantiation the launcher picks compiles without spills (ptxas -v).
__device__ __forceinline__ void cp_wait_n(int n) { // n is a compile-time constant after unrolling
  switch (n) {
  case 0: cp_wait<0>(); break;
  case 1: cp_wait<1>(); break;
  case 2: cp_wait<2>(); break;
  default: cp_wait<3>(); break;
  }
}

template <int FMT, int MT, int NU, int PS, int PR, int RW, int XM, bool CLU>
__global__ void __launch_bounds__(256, 2)
    qgemv_predec_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles, int K,
                        float alpha, const __nv_bfloat16 *x, float *__restrict__ y, int M,
                        int N, int accumulate, int ldp, int lgcl) {
  using U = Unit<FMT>;
  static_assert(U::WQ == 1 && PS >= 1 && PR >= 0 && PS + PR <= NU && NU <= 4, "FP4, 1 <= PS, PS + PR <= NU <= 4");
  static_assert((RW == 1 || RW == 2) && (!CLU || RW == 1) && (XM == 1 || XM == 2) && (MT == 1 || XM == 1),
                "row tiles, x mode (x first only for one token tile)");
  constexpr int DSLOT = 4096; // one unit's A fragments: 2 halves x 4 k16 steps x 32 lanes x 16 B
  constexpr int WSM = PS * DSLOT + (NU - PS) * U::SLOT; // shared memory per warp
  constexpr int KWN = 8 / RW;                           // K-slice warps per row tile
  extern __shared__ uint4 smem[];
  TRACE_BEGIN(y);
  if constexpr (CLU) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  if (ldp == 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int rw = warp / KWN, kw = warp % KWN;
  const int nch = K / 128, KT = K / 64;
  // CLU: the K of row tile rt is split over a cluster of 1 << lgcl blocks; this one (rank cr)
  // takes chunks cb .. cb + nchb - 1
  const int rt = (CLU ? (int)blockIdx.x >> lgcl : (int)blockIdx.x) * RW + rw;
  const int cr = CLU ? (int)blockIdx.x & ((1 << lgcl) - 1) : 0;
  const int nchb = CLU ? nch >> lgcl : nch, cb = cr * nchb;
  const int pc = (nchb + KWN - 1) / KWN, c0 = cb + kw * pc;
  // this warp's units (<= NU: the launcher checks; none past the last row tile)
  const int ncw = rt < ntiles ? max(0, min(cb + nchb, c0 + pc) - c0) : 0;
  uint8_t *const wa = reinterpret_cast<uint8_t *>(smem) + (size_t)warp * WSM;
  // unit u's packed bytes: the tail of its decoded slot (u < PS) or a packed slot
  auto packed = [&](int u) { return u < PS ? wa + u * DSLOT + (DSLOT - U::SLOT) : wa + PS * DSLOT + (u - PS) * U::SLOT; };
  if (ncw > 0) {
    const uint4 *wi = w + ((size_t)rt * KT + 2 * c0) * 32 + lane;
    const uint8_t *si = sc + ((size_t)rt * nch + c0) * U::SBYTES + lane * 16;
#pragma unroll
    for (int u = 0; u < NU; u++) {
      if (u < ncw) {
        uint8_t *slot = packed(u);
#pragma unroll
        for (int i = 0; i < 2; i++) cp_async16(slot + (i * 32 + lane) * 16, wi + u * 64 + i * 32, true);
        if (lane < U::SBYTES / 16) cp_async16(slot + U::WBYTES + lane * 16, si + u * U::SBYTES, true);
      }
      cp_commit(); // one group per unit, empty past ncw: unit u is done once <= NU-1-u are pending
    }
  }
  const int sOff = FMT == DSV4C_FMT_NVFP4 ? lane * 4 : g * 8 + (t >> 1) * 4;
  auto load_packed = [&](int u, uint4 (&tw)[2], uint32_t &sw) {
    cp_wait_n(NU - 1 - u);
    __syncwarp();
    const uint8_t *slot = packed(u);
#pragma unroll
    for (int h = 0; h < 2; h++) tw[h] = *reinterpret_cast<const uint4 *>(slot + (h * 32 + lane) * 16);
    sw = *reinterpret_cast<const uint32_t *>(slot + U::WBYTES + sOff);
  };
  uint32_t ar[PR > 0 ? PR : 1][2][4][4] = {};
#pragma unroll
  for (int u = 0; u < PS + PR; u++) {
    if (u < ncw) {
      uint4 tw[2];
      uint32_t sw;
      load_packed(u, tw, sw);
      if (u < PS) {
        __syncwarp(); // every lane holds its packed pieces before the slot is overwritten
        uint4 *dec = reinterpret_cast<uint4 *>(wa + u * DSLOT);
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int j = 0; j < 4; j++) {
            uint32_t a[4];
            decode_a<FMT, true>(&tw[h], sw, h, j, a);
            dec[(h * 4 + j) * 32 + lane] = make_uint4(a[0], a[1], a[2], a[3]);
          }
      } else {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int j = 0; j < 4; j++) decode_a<FMT, true>(&tw[h], sw, h, j, ar[u - PS][h][j]);
      }
    }
  }
  // The register-decoded units are pure arithmetic, which the compiler may sink past the wait
  // below (a memory clobber does not order it): these empty volatile statements, kept in order
  // with the wait, need every value first.
#pragma unroll
  for (int u = 0; u < PR; u++)
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int q = 0; q < 4; q++) asm volatile("" : "+r"(ar[u][h][j][q]));
  if (ldp == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  TRACE(3);
  TRACE(4);
  // x (the previous kernel's output, M rows of K bf16): this lane's B fragments, token n * 8 + g
  // of token tile n (zero past M), inputs 16t .. 16t+15 of every 64-input half of its units (the
  // packed K order).
  bool real[MT];
  const uint4 *xg[MT];
#pragma unroll
  for (int n = 0; n < MT; n++) {
    real[n] = n * 8 + g < M;
    xg[n] = reinterpret_cast<const uint4 *>(x + (size_t)(real[n] ? n * 8 + g : 0) * K + c0 * 128 + 16 * t);
  }
  uint4 xr[XM == 2 ? NU : 1][2][2];
  if (XM == 2) {
#pragma unroll
    for (int u = 0; u < NU; u++)
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int i = 0; i < 2; i++) xr[u][h][i] = u < ncw && real[0] ? xg[0][u * 16 + h * 8 + i] : make_uint4(0, 0, 0, 0);
  }
  float acc[4][MT][4] = {};
#pragma unroll
  for (int u = 0; u < NU; u++) {
    if (u < ncw) {
      uint4 tw[2];
      uint32_t sw = 0;
      if (u >= PS + PR) load_packed(u, tw, sw);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t bx[MT][8];
#pragma unroll
        for (int n = 0; n < MT; n++) {
          uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
          if (XM == 2) {
            lo = xr[XM == 2 ? u : 0][h][0];
            hi = xr[XM == 2 ? u : 0][h][1];
          } else if (real[n]) {
            lo = xg[n][u * 16 + h * 8];
            hi = xg[n][u * 16 + h * 8 + 1];
          }
          bx[n][0] = lo.x; bx[n][1] = lo.y; bx[n][2] = lo.z; bx[n][3] = lo.w;
          bx[n][4] = hi.x; bx[n][5] = hi.y; bx[n][6] = hi.z; bx[n][7] = hi.w;
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
          uint32_t a[4];
          if (u < PS) {
            const uint4 v = reinterpret_cast<const uint4 *>(wa + u * DSLOT)[(h * 4 + j) * 32 + lane];
            a[0] = v.x; a[1] = v.y; a[2] = v.z; a[3] = v.w;
          } else if (u < PS + PR) {
#pragma unroll
            for (int q = 0; q < 4; q++) a[q] = ar[u - PS][h][j][q];
          } else {
            decode_a<FMT, true>(&tw[h], sw, h, j, a);
          }
#pragma unroll
          for (int n = 0; n < MT; n++) mma16816(acc[j][n], a, bx[n][2 * j], bx[n][2 * j + 1]);
        }
      }
    }
  }
  cp_wait<0>();
  // MT * 4 partial sums per lane, at (n * 4 + k) * 32 + lane of a scratch
  float part[1][MT][4];
#pragma unroll
  for (int n = 0; n < MT; n++)
#pragma unroll
    for (int k = 0; k < 4; k++) part[0][n][k] = (acc[0][n][k] + acc[1][n][k]) + (acc[2][n][k] + acc[3][n][k]);
  auto add_from = [&](const float *src) {
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int k = 0; k < 4; k++) part[0][n][k] += src[(n * 4 + k) * 32 + lane];
  };
  auto write_to = [&](float *dst) {
#pragma unroll
    for (int n = 0; n < MT; n++)
#pragma unroll
      for (int k = 0; k < 4; k++) dst[(n * 4 + k) * 32 + lane] = part[0][n][k];
  };
  // K-slices reduced in fixed order through each warp's first decoded slot (its MMAs are done).
  __syncwarp();
  if (kw > 0) write_to(reinterpret_cast<float *>(wa));
  __syncthreads();
  TRACE(5);
  if (kw == 0)
    for (int s = 1; s < KWN; s++) add_from(reinterpret_cast<const float *>(reinterpret_cast<uint8_t *>(smem) + (size_t)(warp + s) * WSM));
  if constexpr (CLU) {
    // Cluster split-K: ranks 1 .. cl-1 write their block sums into rank 0's scratch past the
    // warps' areas; rank 0 adds them in rank order after the cluster barrier (as in
    // qgemv_stream_kernel): deterministic, y written once.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float *cred = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(smem) + (size_t)8 * WSM);
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); // the arrive at the top
    if (warp == 0 && cr > 0) write_to(cluster.map_shared_rank(cred, 0) + (cr - 1) * MT * 4 * 32);
    cluster.sync();
    if (warp != 0 || cr > 0) return;
    for (int s = 1; s < (1 << lgcl); s++) add_from(cred + (s - 1) * MT * 4 * 32);
  }
  if (kw != 0 || rt >= ntiles) return;
  store_acc<1, MT>(part, rt, ntiles, 0, alpha, y, N, M, N, lane, false, accumulate != 0);
  TRACE(7);
}

// launch_predec_cfg launches one instantiation of qgemv_predec_kernel: ntiles / RW blocks (times
// cl for a cluster split), shared memory for 8 warps' areas and the cluster scratch.
template <int FMT, int MT, int NU, int PS, int PR, int RW, int XM, bool CLU>
int launch_predec_cfg(const void *w, const void *sc, int ntiles, int K, float alpha, const void *x, float *y,
                      int M, int N, int accumulate, int cl, int lgcl, cudaStream_t st) {
  const size_t smem = (size_t)8 * (PS * 4096 + (NU - PS) * Unit<FMT>::SLOT) +
                      (CLU ? (size_t)(cl - 1) * MT * 4 * 32 * sizeof(float) : 0);
  const int cap = min(STREAM_SMEM_MAX, smem_optin_max());
  if (smem > (size_t)cap) return DSV4C_ERR_SHAPE;
  auto kern = qgemv_predec_kernel<FMT, MT, NU, PS, PR, RW, XM, CLU>;
  static DeviceOnce smemOptIn;
  if (int e = opt_in_smem(smemOptIn, kern, cap)) return e;
  static std::atomic<int> clusterFits[64][3]; // per device and cluster size 2, 4, 8
  if (CLU)
    if (int e = cluster_fits(clusterFits, kern, cl, cap)) return e;
  static const int ldp = env_int("DSV4GO_GEMV3_PDLD", 0);
  static const bool pdl = env_int("DSV4GO_GEMV3_PDL", 1) != 0;
  (void)cudaGetLastError();
  // Two token tiles (M = 9..16) in pairs of blocks (clusters of 2 the kernel does not use): same
  // call (2026-12-01 16:45, cudabench, NVFP4 at M = 16, two runs, us), expert w1/w3 4.74 / 4.69
  // against 5.23 / 5.25, w2 5.21 / 5.22 against 5.30 / 5.32; at M <= 8 (one token tile) within
  // 1 %, so left alone there. Clusters of 4: w1/w3 5.27 / 5.25, w2 4.96 / 4.97 at M = 16, but
  // 0.4-0.5 us slower at M = 1 and 4. DSV4GO_GEMV3_CLA=n sets n for every launch without a K
  // split (1: none).
  Launch lc((ntiles + RW - 1) / RW * cl, smem, st, pdl, CLU ? cl : launch_cl((ntiles + RW - 1) / RW, MT == 2 && cluster_ok() ? 2 : 1));
  return (int)cudaLaunchKernelEx(&lc.cfg, kern, (const uint4 *)w, (const uint8_t *)sc, ntiles, K, alpha,
                                 (const __nv_bfloat16 *)x, y, M, N, accumulate, ldp, lgcl);
}

// launch_predec picks the instantiation for one FP4 matrix at M <= 8 (MT = 1) or M <= 16 (MT =
// 2) with ntiles row tiles, each split over cl blocks (a cluster; 1:
// none), or declines (DSV4C_ERR_SHAPE: the caller uses the streaming kernel). Two row tiles per
// block when the row tiles are more than the SMs but at most twice as many, so that the grid
// takes one block per SM and the next grid the other half (expert w2, same call 2026-11-30
// 07:05, NVFP4 M = 1: 2.72 against 2.89 us with one row tile per block; DSV4GO_GEMV3_PDRW=1
// keeps one). At most 4 units per warp. x: all of a lane's B fragments loaded first (xfirst: M
// <= 2) or per unit as the MMAs need them (M > 2, where the first way holds more registers
// than it saves); for 4-unit warps 3 units are decoded into shared memory and 1 into registers
// (xfirst, and MT = 2) or 2 and 2. Same call (07:05, NVFP4, us at M = 1 / 2 / 4 / 8): w1/w3 x
// first 2.65 / 2.85 / 3.09 / 3.38, per unit 2.79 / 2.91 / 2.96 / 3.07; w2 2.73 / 2.80 / 2.93 /
// 3.32 and 2.76 / 2.85 / 2.97 / 3.06.
template <int FMT, int MT>
int launch_predec(bool xfirst, const void *w, const void *sc, int ntiles, int K, float alpha, const void *x,
                  float *y, int M, int N, int accumulate, int cl, int lgcl, int sms, cudaStream_t st) {
  static const int rwk = env_int("DSV4GO_GEMV3_PDRW", 2);
  const int rw = cl == 1 && rwk == 2 && ntiles > sms && ntiles <= 2 * sms ? 2 : 1;
  const int nch = K / 128 / cl, upw = (nch + 8 / rw - 1) / (8 / rw);
  if (M > 8 * MT || upw < 1 || upw > 4) return DSV4C_ERR_SHAPE;
#define PDC(NU, PS, PR, RW, XM)                                                                                      \
  (cl > 1 ? launch_predec_cfg<FMT, MT, NU, PS, PR, 1, XM, true>(w, sc, ntiles, K, alpha, x, y, M, N, accumulate, cl, lgcl, st) \
          : launch_predec_cfg<FMT, MT, NU, PS, PR, RW, XM, false>(w, sc, ntiles, K, alpha, x, y, M, N, accumulate, 1, 0, st))
#define PD(NU, PS, PR, XM) (rw == 2 ? PDC(NU, PS, PR, 2, XM) : PDC(NU, PS, PR, 1, XM))
  if constexpr (MT == 2) {
    if (upw == 1) return PD(1, 1, 0, 1);
    if (upw == 2) return PD(2, 2, 0, 1);
    return PD(4, 3, 1, 1);
  } else {
    if (upw == 1) return xfirst ? PD(1, 1, 0, 2) : PD(1, 1, 0, 1);
    if (upw == 2) return xfirst ? PD(2, 2, 0, 2) : PD(2, 2, 0, 1);
    if (xfirst) { // 3 + 1 needs 105 KB: where the opt-in limit is lower (sm_120), x per unit, 2 + 2
      const int r = PD(4, 3, 1, 2);
      if (r != DSV4C_ERR_SHAPE) return r;
    }
    return PD(4, 2, 2, 1);
  }
#undef PD
#undef PDC
}

template <int FMT, int MT>
int launch_stream(const void *w, const void *sc, int N, int npad, int K, float alpha,
                  const void *x, float *y, int M, int accumulate, Groups gp, cudaStream_t st) {
  const int sms = device_sms();
  static const int bps = max(1, env_int("DSV4GO_GEMV3_BPS", 2));
  static const int depth = env_int("DSV4GO_GEMV3_DEPTH", 1);
  static const int up = env_int("DSV4GO_GEMV3_UP", 2);
  static const bool small = env_int("DSV4GO_GEMV3_SMALL", 1) != 0;
  const int ntiles = npad / 16;
  // Grouped launches (MoE experts), balanced (FLAT): bpg blocks per group (below), each owning a contiguous run of its group's row tiles (ntiles / bpg, rounded either way),
  // whose units the 8 warps split evenly at unit granularity (a warp may start or end inside
  // a row tile; those partial sums meet in shared memory, added in warp order). With whole row
  // tiles per warp and power-of-two blocks (below) 12 expert w1/w3 matrices made 192 blocks
  // for 264 slots: 60 SMs streamed twice the bytes of the other 72. Same call (2026-11-30
  // 11:50, NVFP4, M = 1 / 4 / 16, us): 12 w1/w3 matrices 19.31 / 20.05 / 26.81 (M = 16: x does
  // not fit, the earlier kernel) against 22.39 / 22.99 / 26.85 in the power-of-two layout;
  // 6 w2 11.17 / 11.72 / 13.63 against 12.75 / 13.16 / 15.62. With 3 units issued before x is
  // staged and, where x is small (w1/w3 at M <= 2, w2 at M <= 4), x's loads ahead of them (the
  // launch_depth defaults; 12:04): 18.26 / 19.35 and 10.56 / 11.15; the earlier split-K kernel
  // 19.68 / 20.01 / 26.82 and 11.42 / 12.34 / 16.75.
  // DSV4GO_GEMV3_FLAT=0 keeps the power-of-two layout.
  static const int flat = env_int("DSV4GO_GEMV3_FLAT", 1);
  if (gp.G > 1 && flat != 0) {
    const int nch = K / 128;
    // Blocks per group: one wave of bps * SMs / G, unless more, smaller blocks in several waves
    // cut a makespan model, (waves) x (row tiles of the largest block + FLATC for a block's
    // start), with at least 16 units per warp: when G does not divide the slots (a batch's
    // routed experts: 46 w1/w3 matrices take 11 blocks each, 506 in two waves, rather than 5
    // each in one wave that leaves 34 slots idle and loads 98 SMs with two blocks of 26 row
    // tiles). 12 w1/w3 (22) and 6 w2 (44) keep one wave. FLATC = 1: without the start term, 156 w1/w3 matrices took 32 blocks of 4 row
    // tiles each in 19 waves; with it 5 blocks each in 3 waves (same call 2026-11-30 14:06,
    // NVFP4, ids ready, M = 2 / 3: 188.3 / 191.7 against 219.0 / 233.3 us; 46 and 160
    // matrices within 2 %). DSV4GO_GEMV3_FLATW=0: always one wave; DSV4GO_GEMV3_FLATC: the term.
    static const int flatw = env_int("DSV4GO_GEMV3_FLATW", 1);
    static const int flatc = max(0, env_int("DSV4GO_GEMV3_FLATC", 1));
    const long long slots = (long long)sms * bps;
    const int vt = gp.rows2() ? 2 * ntiles : ntiles; // DSV4C_W13_ROWS: a block streams its rows of w1 and w3
    gp.bpg = (int)max(1LL, min((long long)ntiles, slots / gp.G));
    if (flatw != 0) {
      auto cost = [&](int b) { return ((long long)gp.G * b + slots - 1) / slots * ((vt + b - 1) / b + flatc); };
      long long best = cost(gp.bpg);
      const int bmax = min(ntiles, max(gp.bpg, vt * nch / 128));
      for (int b = 1; b <= bmax; b++)
        if (cost(b) < best) best = cost(b), gp.bpg = b;
    }
    gp.cl = 1;
    gp.lgcl = 0;
    if (2LL * gp.G * gp.bpg < sms || (long long)gp.G * gp.bpg > 0x7fffffff) return DSV4C_ERR_SHAPE;
    const int tpb = (ntiles + gp.bpg - 1) / gp.bpg; // row tiles of the largest block (of each matrix)
    const int upw = (int)(((long long)(gp.rows2() ? 2 : 1) * tpb * nch + 7) / 8);
    const bool pair = up != 1 && nch % 2 == 0;
    const size_t extra = gp.rows2() ? (size_t)2 * tpb * 16 * M * sizeof(float) : 0;
#define FLATL(D, P) launch_depth<FMT, MT, D, P, false, true>(upw, w, sc, ntiles, K, alpha, x, y, M, N, 0, 0, accumulate, gp, st, extra)
    int r;
    if constexpr (FMT == DSV4C_FMT_FP8B) {
      if (gp.rows2()) return DSV4C_ERR_SHAPE; // (its scales are read outside the ring, by real row)
      r = depth == 2 ? FLATL(5, 1) : FLATL(4, 1);
    } else {
      r = depth == 2 ? (pair ? FLATL(10, 2) : FLATL(10, 1)) : (pair ? FLATL(8, 2) : FLATL(8, 1));
      if (r == DSV4C_ERR_SHAPE && small && depth != 2) r = pair ? FLATL(4, 2) : FLATL(4, 1); // x too large beside the 8-deep rings
    }
#undef FLATL
    if (r != DSV4C_ERR_SHAPE) return r;
    // declined (x and the partial-sum slots do not fit): the power-of-two layout below, whose
    // whole row tiles per warp need no slots, then the earlier kernels
  }
  // staged SwiGLU, w1 / w3 pairs or rows: balanced layout only (the caller falls back)
  if (gp.swiglu || gp.pairs || gp.rows2()) return DSV4C_ERR_SHAPE;
  gp.early = 0; // the layouts below read the ids after the wait (they issue nothing before it)
  // R row tiles per block so that the grid fits in one wave; below 8 a power of two (warps
  // are R row tiles x 8/R K-slices), from 8 up whole row tiles per warp (a power of two as
  // well for grouped launches, where a block must not span two groups).
  int R = (int)(((long long)gp.G * ntiles + sms * bps - 1) / (sms * bps));
  int lgkw = 0;
  if (R < 8 || gp.G > 1) {
    int lr = 0;
    while ((1 << lr) < R) lr++;
    R = 1 << lr;
    lgkw = lr < 3 ? 3 - lr : 0;
  }
  if (gp.G > 1 && (R > ntiles || ntiles % R != 0)) return DSV4C_ERR_SHAPE;
  gp.bpg = (ntiles + R - 1) / R;
  // Too few row tiles to give half the SMs a block (wkv: 32 row tiles): K is split over a
  // cluster of cl blocks per row tile (a power of two <= 8 dividing the chunk count, the
  // smallest that gives half the SMs a block: 4 for wkv), for one matrix on devices with
  // clusters (sm_90). Same call (2026-11-30 04:55), against the older kernels' split K at
  // M = 1: NVFP4 3.47 against 3.74 us, MXFP4 3.45 against 3.72, FP8-block 3.65 against 4.70.
  // DSV4GO_GEMV3_CL=c forces c (a benchmark knob; also for one matrix of one row tile per
  // block that does not need it: clusters of 2 took w1/w3 4.44 against 4.53 us, and w2, two
  // waves then, 7.30 against 3.77), 1 declines (the older kernels split K).
  gp.cl = 1;
  gp.lgcl = 0;
  static const int clk = env_int("DSV4GO_GEMV3_CL", 0);
  if (gp.G == 1 && R == 1 && clk != 1 && (clk > 1 || 2LL * gp.bpg < sms) && cluster_ok()) {
    const int nch = K / 128;
    int cl = 2;
    while (cl < 8 && (clk > 0 ? cl < clk : 2LL * gp.bpg * cl < sms)) cl *= 2;
    while (cl > 1 && nch % cl != 0) cl /= 2;
    gp.cl = cl;
    while ((1 << gp.lgcl) < cl) gp.lgcl++;
  }
  if (2LL * gp.G * gp.bpg * gp.cl < sms || (long long)gp.G * gp.bpg * gp.cl > 0x7fffffff) return DSV4C_ERR_SHAPE;
  // FP4: 8 units per warp in flight (10 with DSV4GO_GEMV3_DEPTH=2), two units per iteration
  // when every warp's K-slice has an even number of chunks (DSV4GO_GEMV3_UP=1: one).
  // FP8-block (2 KB units): 4 (5), one unit per iteration.
  const int nch = K / 128 / gp.cl, kwN = 1 << lgkw;
  const bool pair = up != 1 && nch % (2 * kwN) == 0;
  // units per warp (the most any warp streams)
  const int upw = (nch + kwN - 1) / kwN * ((R + (8 >> lgkw) - 1) / (8 >> lgkw));
#define LAUNCH(D, P)                                                                           \
  (gp.cl > 1 ? launch_depth<FMT, MT, D, P, true>(upw, w, sc, ntiles, K, alpha, x, y, M, N, R, lgkw, accumulate, gp, st) \
             : launch_depth<FMT, MT, D, P, false>(upw, w, sc, ntiles, K, alpha, x, y, M, N, R, lgkw, accumulate, gp, st))
  // FP4, one matrix, one row tile per block (or cluster), <= 4 units per warp: the predecode
  // kernel (above). Same call (2026-11-30 07:05, NVFP4, M = 1), against this file's streaming
  // kernel: expert w1/w3 2.65 against 4.02 us, w2 2.72 against 3.72, wkv 2.21 against 3.50; at M
  // = 8 3.07 / 3.06 / 2.42 against 4.75 / 4.46 / 4.71. Two token tiles (M = 9..16), same call
  // (07:17), against the kernels used before (w1/w3 and wkv: the earlier kernels of qgemm.cu,
  // x does not fit beside this file's rings; w2: the streaming kernel): M = 12 4.20 / 4.01 /
  // 3.14 against 5.80 / 5.15 / 4.82 us, M = 16 5.23 / 5.30 / 3.34 against 6.09 / 5.55 / 4.81.
  // DSV4GO_GEMV3_PREDEC=0 turns it off, 1 / 2 force x per unit / x first at M <= 8,
  // DSV4GO_GEMV3_PREDEC16=0 keeps M > 8 off it.
  static const int predec = env_int("DSV4GO_GEMV3_PREDEC", -1);
  static const bool predec16 = env_int("DSV4GO_GEMV3_PREDEC16", 1) != 0;
  if constexpr (FMT != DSV4C_FMT_FP8B) {
    if (predec != 0 && gp.G == 1 && R == 1 && lgkw == 3 && (MT == 1 || predec16)) {
      const bool xfirst = predec == 2 || (predec < 0 && M <= 2);
      const int r = launch_predec<FMT, MT>(xfirst, w, sc, ntiles, K, alpha, x, y, M, N, accumulate, gp.cl, gp.lgcl, sms, st);
      if (r != DSV4C_ERR_SHAPE) {
        if (r == 0) gemv_path.store(gp.cl > 1 ? DSV4C_GEMV_PREDEC_CLUSTER : DSV4C_GEMV_PREDEC, std::memory_order_relaxed);
        return r;
      }
    }
  }
  if constexpr (FMT == DSV4C_FMT_FP8B) {
    return depth == 2 ? LAUNCH(5, 1) : LAUNCH(4, 1);
  } else {
    if (depth == 2) return pair ? LAUNCH(10, 2) : LAUNCH(10, 1);
    int r = pair ? LAUNCH(8, 2) : LAUNCH(8, 1);
    // x too large beside the 8-deep rings (wo_b at M = 4, w2 at M = 16): a 4-deep ring leaves
    // it room. Same call (2026-11-30 04:53), against the earlier kernels: wo_b M = 4 8.71
    // against 9.79 us, w2 M = 16 5.67 against 5.91 us. TestQGEMMStream's 4-deep cases passed on
    // the H200 (04:44). DSV4GO_GEMV3_SMALL=0 turns it off.
    if (r == DSV4C_ERR_SHAPE && small) r = pair ? LAUNCH(4, 2) : LAUNCH(4, 1);
    return r;
  }
#undef LAUNCH
}

} // namespace

int dsv4c_qgemv_stream(int fmt, const void *d_w, const void *d_scales, long long wstride,
                       long long sstride, int N, int npad, int K, float alpha,
                       const float *d_alphas, const int *d_ids, const void *d_x, float *d_y,
                       int M, int G, int E, int accumulate, float limit, void *d_h,
                       cudaStream_t st) {
  if (N <= 0 || M <= 0 || M > 16 || K <= 0 || K % 128 != 0 || npad % 64 != 0 || npad < N ||
      G <= 0 || E <= 0 || wstride % 16 != 0 || sstride % 16 != 0 || ((uintptr_t)d_w & 15) != 0 ||
      ((uintptr_t)d_scales & 15) != 0 || ((uintptr_t)d_x & 15) != 0)
    return DSV4C_ERR_SHAPE;
  // DSV4C_IDS_READY: read the ids before the wait (DSV4GO_GEMV3_READY=0 ignores the promise)
  static const bool readyOK = env_int("DSV4GO_GEMV3_READY", 1) != 0;
  // (balanced layout only, see launch_stream; the power-of-two layout issues nothing before x is
  // staged when it has ids)
  const int ready = readyOK && d_ids && G > 1 && (accumulate & DSV4C_IDS_READY) != 0;
  const int swiglu = (accumulate & DSV4C_X_SWIGLU) != 0;
  if (swiglu && G <= 1) return DSV4C_ERR_SHAPE; // the balanced layout is for G > 1
  const int pairs = (accumulate & DSV4C_W13_PAIRS) != 0 ? G / 2 : 0;
  if ((accumulate & DSV4C_W13_PAIRS) != 0 && (G % 2 != 0 || G < 2 || swiglu)) return DSV4C_ERR_SHAPE;
  const int rows2 = (accumulate & DSV4C_W13_ROWS) != 0;
  if (rows2 && (pairs || swiglu || !d_h || (accumulate & 1) != 0)) return DSV4C_ERR_SHAPE;
  accumulate &= 1;
  const Groups gp{wstride / 16, sstride, d_alphas, d_ids, G, E, 0, 1, 0, ready, swiglu, limit, pairs,
                  rows2 ? (__nv_bfloat16 *)d_h : nullptr};
#define STREAM(F)                                                                               \
  return M <= 8 ? launch_stream<F, 1>(d_w, d_scales, N, npad, K, alpha, d_x, d_y, M, accumulate, gp, st) \
                : launch_stream<F, 2>(d_w, d_scales, N, npad, K, alpha, d_x, d_y, M, accumulate, gp, st)
  switch (fmt) {
  case DSV4C_FMT_NVFP4:
    STREAM(DSV4C_FMT_NVFP4);
  case DSV4C_FMT_MXFP4:
    STREAM(DSV4C_FMT_MXFP4);
  case DSV4C_FMT_FP8B:
    STREAM(DSV4C_FMT_FP8B);
  }
#undef STREAM
  return DSV4C_ERR_FORMAT;
}

int dsv4c_qgemv_stream_enabled(int fmt, int grouped) {
  static const bool on = env_int("DSV4GO_GEMV3", 1) != 0;
  static const int grp = env_int("DSV4GO_GEMV3_GROUPED", -1);
  if (!on) return 0;
  if (!grouped) return 1;
  // Grouped MoE launches: the streaming kernel in its balanced layout (FLAT) for every format
  // (same call 2026-11-30 12:04, us at M = 1 against the earlier split-K kernel: NVFP4 12
  // w1/w3 matrices 18.26 / 19.68, 6 w2 10.56 / 11.42; FP8-block 28.16 / 32.82, 15.68 / 18.22;
  // see launch_stream). DSV4GO_GEMV3_GROUPED=0 forces the earlier kernel.
  return grp >= 0 ? (grp != 0) : 1;
}

void dsv4c_gemv_path_set(int p) { gemv_path.store(p, std::memory_order_relaxed); }

int dsv4c_gemv_path(void) { return gemv_path.load(std::memory_order_relaxed); }
