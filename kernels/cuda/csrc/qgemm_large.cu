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
// like the weights', so the pipeline needs no registers for staging. Where x is reused by
// enough row blocks (launch_wgmma), a pre-pass (xperm_kernel) first writes x once in that
// permuted, swizzled tile image into a pool buffer, and the producer then moves a chunk's x
// with one 32 KB bulk copy: the 4-byte copies were its largest cost. Since session 8 most
// launches permute nothing (XM 3, the default except where launch_wgmma says): the producer
// loads x in natural order with tensor-map copies (128-byte swizzle), and the consumers build A
// in natural order instead, each lane reading the words of its quad's lanes that hold its
// inputs (decode_a_nat): a costlier decode, but no pass over x.
//
// Block: 3 warpgroups, 256 weight rows x 128 tokens. A producer warpgroup (setmaxnreg 40)
// streams K in 128-input chunks through a 3-4 stage ring (x tiles, packed weights and scales of
// one chunk per stage) with cp.async completing on mbarriers; two consumer warpgroups
// (setmaxnreg 232) each own two 64-row blocks (row tiles mb*8 + warp, mb = 0, 1), i.e. two
// accumulators of 64 floats per thread, and keep up to 4 wgmma groups in flight (one A
// register set per 64-input tile and row block). x is read from L2 once per 256 rows. The grid
// is persistent (one block per SM, work units handed out round-robin) and launched with
// programmatic dependent launch: a block's first weight chunks load before griddepcontrol.wait.
// When the units are fewer than the SMs, K is split: each split stores its partial tile into a
// stream-ordered scratch buffer and a second kernel (splitk_reduce_kernel, PDL) sums the splits
// in split order into y (deterministic; no atomics, no zeroing of y). Without the buffer
// (DSV4GO_QGEMM_SPLITRED=0) the splits of a tile form a cluster and are summed through
// distributed shared memory, or, where such clusters do not all fit on the GPU at once, added
// into y with float32 atomics. A tile that
// lies wholly inside y is stored without per-element bounds checks. Where the 256 x 128 tiles
// would split K into short splits (<= 4 chunks) and 128-row x 64-token tiles fill the SMs
// (expert w2 at M = 256), the same kernel runs on those instead (template ROWT 8, TN 64: each
// consumer warpgroup one 64-row block, wgmma m64n64k16), K unsplit (launch_wgmma). Where 256 x
// 128 tiles would split K of <= 32 chunks and 64-row x 128-token tiles fill 7/8 to 1 wave (attn
// wkv at M = 2048), it runs on those (template ROWT 4: both consumer warpgroups on the same
// 64-row block, alternate chunks, own accumulators added through shared memory), K unsplit.
// Measured on the H200: BENCHMARKS.md, "Large-M GEMM (wgmma)".
#include <cuda.h> // CUtensorMap (the x tensor map of XM 3; the driver function comes through cudart)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>

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

// acc (+)= A (registers, 64 x 16 bf16) . B (shared memory, 64 tokens x 16, descriptor)
__device__ __forceinline__ void wgmma_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1)
               : "memory");
}
// wgmma_n picks the instruction for TN tokens (128 or 64)
template <int TN> __device__ __forceinline__ void wgmma_n(float (&d)[TN / 2], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (TN == 128)
    wgmma_n128(d, a, desc);
  else
    wgmma_n64(d, a, desc);
}

// ---- the kernel ----
//
// A ring stage holds one 128-input chunk: its two x tiles (1024-byte aligned, TN tokens x 128
// bytes each), the packed weights and the scales of the block's ROWT row tiles. Three block
// tiles: 256 rows x 128 tokens (ROWT 16, TN 128: every shape), 128 rows x 64 tokens (ROWT 8,
// TN 64) and 64 rows x 128 tokens (ROWT 4, TN 128), the last two for shapes with too few 256 x
// 128 tiles for the SMs (launch_wgmma).
template <int FMT, int ROWT_ = 16, int TN_ = 128> struct LgSmem {
  static constexpr int WQ = Fmt<FMT>::WQ;
  static constexpr int ROWT = ROWT_, TN = TN_;
  static constexpr int XT = TN * 128;           // one 64-input x tile (TN tokens)
  static constexpr int W = ROWT * 2 * 512 * WQ; // packed weights per chunk
  static constexpr int S = FMT == DSV4C_FMT_NVFP4 ? ROWT * 128 : FMT == DSV4C_FMT_MXFP4 ? ROWT * 64 : 0;
  static constexpr int STAGE = (2 * XT + W + S + 1023) / 1024 * 1024;
  // 64 x 128 tile (ROWT 4): RX bytes after the ring and its barriers where the two consumer
  // warpgroups exchange half of their accumulators (16 KB), and a 220 KB budget for ring and
  // exchange (5 stages in every format), since each consumer sees only every other stage
  static constexpr int RX = ROWT == 4 ? 128 * 32 * 4 : 0;
  static constexpr int BUDGET = ROWT == 4 ? 220 * 1024 - RX : 200 * 1024;
  // ring depth: as many stages as fit in the budget, at most 8 (256 x 128: 4, FP8-block 3;
  // 128 x 64: 8, FP8-block 6; 64 x 128: 5)
  static constexpr int WS = BUDGET / STAGE < 8 ? BUDGET / STAGE : 8;
  static constexpr int TOTAL = WS * STAGE + 1024 + (RX ? 256 + RX : 0);
};

__device__ __forceinline__ void cp_async4(uint32_t smem, const void *gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(valid ? 4 : 0));
}

// ---- mbarriers (shared::cta) ----
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// wait until the phase with the given parity (0, 1) of bar has completed (acquire, CTA scope)
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred P1;\nLAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// one arrival on bar once all of this thread's earlier cp.async have landed (counted in the
// barrier's expected arrivals: .noinc)
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async16s(uint32_t smem, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}
// tx bytes that the current phase of bar must also see completed (bulk copies)
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// bulk copy of bytes (a multiple of 16; both addresses 16-byte aligned) from global memory into
// this block's shared memory, completing as tx bytes on bar
__device__ __forceinline__ void bulk_g2s(uint32_t smem, const void *gmem, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem),
               "l"(gmem), "r"(bytes), "r"(bar)
               : "memory");
}
// 2-D tensor copy of one box of the tensor map at (c0 innermost, c1) into this block's shared
// memory (1024-byte aligned for the 128-byte swizzle), completing as tx bytes on bar
__device__ __forceinline__ void tma_load_2d(uint32_t smem, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem),
               "l"(map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
// cluster-wide barrier of all threads (release / acquire)
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// the shared::cluster address of a shared::cta address in block `rank` of the cluster
__device__ __forceinline__ uint32_t mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ float4 ld_dsmem_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}
// barrier `id` among `n` threads (whole warps)
__device__ __forceinline__ void named_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// hides a pointer's value from the optimizer (keeps address arithmetic sequential)
template <typename T> __device__ __forceinline__ void opaque(T *&p) { asm volatile("" : "+l"(p)); }
template <int R> __device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// Timeline probes (compiled out unless DSV4_LG_TRACE is defined: tools/cuda_large_trace.cu
// includes this file): thread 0 (producer) and threads 128 and 256 (the first warp of each
// consumer warpgroup) of every block record %globaltimer at fixed points into words 0-15 of a
// LGT_WORDS-word record per block, and, for the block's first unit, per chunk c < 64: word 16 +
// c when the producer starts chunk c (its ring slot free), word 80 + c when chunk c's consumer
// finds its full barrier complete.
#ifdef DSV4_LG_TRACE
#define LGT_WORDS 144
__device__ unsigned long long *g_lgtrace;
__device__ unsigned g_lgtrace_n, g_lgtrace_cap;
__device__ int g_lgt_nomain; // 1: no chunks run (the fixed cost alone)
#define LGT_NCH(n) (g_lgt_nomain ? 0 : (n))
__device__ __forceinline__ unsigned long long lg_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define LGT_BEGIN(yp)                                                                          \
  __shared__ unsigned lgt_slot;                                                                \
  if (threadIdx.x == 0) {                                                                      \
    const unsigned long long t = lg_now();                                                     \
    const unsigned slot = min(atomicAdd(&g_lgtrace_n, 1u), g_lgtrace_cap - 1);                 \
    unsigned long long *r = g_lgtrace + (size_t)slot * LGT_WORDS;                              \
    unsigned smid;                                                                             \
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));                                          \
    r[0] = (unsigned long long)(uintptr_t)(yp);                                                \
    r[1] = ((unsigned long long)smid << 32) | blockIdx.x;                                      \
    r[2] = t;                                                                                  \
    lgt_slot = slot;                                                                           \
  }
#define LGT_PTR()                                                                              \
  unsigned long long *lgt_rec =                                                                \
      (threadIdx.x == 0 || threadIdx.x == 128) ? g_lgtrace + (size_t)lgt_slot * LGT_WORDS : nullptr; \
  unsigned long long *lgt_crec = (threadIdx.x == 0 || threadIdx.x == 128 || threadIdx.x == 256)    \
                                     ? g_lgtrace + (size_t)lgt_slot * LGT_WORDS                      \
                                     : nullptr;
#define LGT(i)                                                                                 \
  if (lgt_rec) lgt_rec[i] = lg_now();
#define LGT_ONCE(i)                                                                            \
  if (lgt_rec && !lgt_rec[i]) lgt_rec[i] = lg_now();
#define LGT_CHUNK(base, u, c)                                                                  \
  if (lgt_crec && (u) == (int)blockIdx.x && (c) < 64) lgt_crec[(base) + (c)] = lg_now();
#else
#define LGT_BEGIN(yp)
#define LGT_PTR()
#define LGT(i)
#define LGT_ONCE(i)
#define LGT_NCH(n) (n)
#define LGT_CHUNK(base, u, c)
#endif

// ---- the kernel: warp-specialized, persistent ----
//
// 3 warpgroups. Warpgroup 0 produces: cp.async of packed weights and scales, and x (XM below),
// into a WS-deep ring of 128-input chunks; each producer thread's copies complete on the slot's
// "full" mbarrier (128 arrivals; the bulk and tensor-map copies of x as its tx bytes). x
// staging with XM 0: producer warp w copies the tile's tokens TPW w .. TPW w + TPW - 1 (TPW =
// TN / 4), one token per instruction; lane l copies input pair l = 8t + 2j + hi (t = l/8, j =
// l/2 % 4, hi = l % 2) of a 64-input tile, which is word t of chunk 2j + hi of the token's
// 128-byte row (before the swizzle): 128 contiguous global bytes and 32 distinct banks per
// instruction.
// Warpgroups 1 and 2 consume: per 64-input tile h and 64-row block mb, wait until the wgmma
// group that last read the A registers of (h, mb) has completed (wait_group 2 NMB - 1: 3 on
// the 256-row tile, 1 on the 128-row one; the groups issued since stay queued on the tensor
// cores), decode 4 k16 steps of A (decode_a; XM 3: decode_a_nat),
// issue 4 wgmma and commit; lane 0 of each consumer warp arrives on the slot's "empty"
// mbarrier (8 arrivals) once the groups that read the slot have completed.
// The grid is persistent: block b takes the work units b, b + gridDim.x, ... (unit = ROWT-tile
// row block x TN-token block x K split; split fastest, then row block), and the producer runs
// ahead across units, so the next unit's first chunks load during the epilogue.
// mode: 0 = store y, 1 = y += (accumulate, one split), 2 = float32 atomicAdd (split-K, y
// zeroed first or accumulated), 3 (store) and 4 (y +=) = split-K reduced inside a cluster of
// `splits` blocks (one unit each) through distributed shared memory, 5 = split-K partial tile
// stored to a scratch buffer (y) for splitk_reduce_kernel (only in the RED instantiation, so
// that the others keep their code: their SASS is identical to the kernel before RED existed).
// A split past the end of
// K (splits * kper > K / 128) has no chunks and contributes zeros. The 64 x 128 tile (ALT,
// ROWT 4) runs modes 0 and 1 only.
// ALT (ROWT 4, TN 128): 64 rows x 128 tokens, K unsplit; consumer warpgroup wg takes the
// unit's chunks c with c % 2 == wg (its own full barriers, full1 for wg 1; 4 arrivals on a
// slot's empty barrier), and the two partial sums are added in the epilogue.
// XM, how x reaches the ring: 0 = 4-byte cp.async of each input pair to its permuted place;
// 1 = x comes as xp, already in the shared-memory tile layout (xperm_kernel), one 32 KB bulk
// copy per chunk; 3 = two tensor-map copies per chunk (xmap: natural order, 128-byte swizzle,
// tokens past M zero) completing on the full barrier, and the consumers build A in natural
// input order instead (decode_a_nat; the packed weights land swizzled, wsw_of). (2, x permuted
// in shared memory by the consumers, was removed in session 8: slower than 3 everywhere.)
// wsw_of returns the XOR that XM 3 applies to uint4 index d of a chunk's packed weights in
// shared memory (d < 128 within each 128-uint4 group; the XOR changes bits 0-1 (FP4) or 0-2
// (FP8-block) only): FP4 uint4 d = 32 (tile) + 4g + t goes to 4g + (t ^ (g / 2)), FP8-block uint4
// d = 64 (tile) + 8g + 2t + i to 8g + ((2t + i) ^ g). Then the 8 lanes g of a quad position read
// 8 different 16-byte bank groups in decode_a_nat. Mirrored bit for bit, with load_w's copy
// order and decode_a_nat, by kernels/cuda/pack_test.go emulateNat (CI, no GPU): change both.
template <int FMT> __device__ __forceinline__ int wsw_of(int d) {
  return FMT == DSV4C_FMT_FP8B ? (d >> 3) & 7 : (d >> 3) & 3;
}

// decode_a_nat builds the bf16 A fragments of the 4 k16 steps of 64-input tile h (0, 1) in
// natural input order (XM 3: x in shared memory exactly as the tensor-map copies leave it),
// from the packed tile at q (lane L's uint4 at q + L * 16 * WQ before the swizzle, wsw_of) and the
// scale words sw[j] that cover step j (NVFP4: lane (g, j)'s; MXFP4: lane (g, 2 (j / 2))'s;
// FP8-block: the block scale). The packing (pack.go) gives lane (g, t) input pairs 8t + 2j + hi
// of step j; natural order wants pairs 8j + t (registers 0, 1) and 8j + 4 + t (registers 2, 3),
// i.e. lane (g, j)'s words of steps t / 2 and 2 + t / 2, half t % 2 of each (rows g and g + 8).
// So each lane reads two words of each of its quad's lanes and decodes half of each: the half
// is chosen by shift amounts that depend on t alone (the same instructions in every lane).
// E2M1 as in dec_e2m1: half 0 = registers a0, a1 of the word, half 1 = a2, a3 (a2 = q & M = a0
// of q >> 6; a3's magnitude is a1's shifted right by 7). FP8-block: word t of lane (g, j)'s two
// uint4 (bytes 0-1 row g, 2-3 row g + 8). Each read is 32 bits; the swizzle puts the 8 rows g'
// words of one read in 8 different bank groups (conflict-free). (Without it, 16-byte reads of
// the quad lanes' uint4 and a select were slower: FP8-block's selects made ptxas serialize the
// wgmma, C7513.) Mirrored by pack_test.go emulateNat: change both.
template <int FMT>
__device__ __forceinline__ void decode_a_nat(const uint8_t *q, const uint32_t (&sw)[4], int h, int g, int t,
                                             uint32_t (&a)[4][4]) {
  constexpr int SMUL = Fmt<FMT>::SMUL, SADD = Fmt<FMT>::SADD;
  if (FMT == DSV4C_FMT_FP8B) {
    const uint32_t S = scale_pair<SMUL, SADD>(sw[0], 0);
#pragma unroll
    for (int j = 0; j < 4; j++) {
      // steps t / 2 and 2 + t / 2 (uint4 0 and 1 of lane (g, j)), half t % 2
      const uint32_t X = *reinterpret_cast<const uint32_t *>(q + (8 * g + ((2 * j) ^ g)) * 16 + 4 * t);
      const uint32_t Y = *reinterpret_cast<const uint32_t *>(q + (8 * g + ((2 * j + 1) ^ g)) * 16 + 4 * t);
      a[j][0] = bmul(dec_e4m3(X, 0), S);
      a[j][1] = bmul(dec_e4m3(X, 2), S);
      a[j][2] = bmul(dec_e4m3(Y, 0), S);
      a[j][3] = bmul(dec_e4m3(Y, 2), S);
    }
  } else {
    const uint32_t M = 0x81C081C0u, MAG = 0x01C001C0u, SG = 0x80008000u;
    const uint32_t mg = (t & 1) ? 1u : 64u, ms = (t & 1) ? 4u : 2u; // multipliers: shifts on the FMA pipe
    const int sh = (t & 1) * 7;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      // words t / 2 (step t / 2) and 2 + t / 2 of lane (g, j)
      const uint8_t *p = q + (4 * g + (j ^ (g >> 1))) * 16 + 4 * (t >> 1);
      const uint32_t X = *reinterpret_cast<const uint32_t *>(p);
      const uint32_t Y = *reinterpret_cast<const uint32_t *>(p + 8);
      const uint32_t Sg = scale_pair<SMUL, SADD>(sw[j], h * 2), Sg8 = scale_pair<SMUL, SADD>(sw[j], h * 2 + 1);
      a[j][0] = bmul((X * mg) & M, Sg);
      a[j][1] = bmul(((shl_fma<3>(X) >> sh) & MAG) | ((X * ms) & SG), Sg8);
      a[j][2] = bmul((Y * mg) & M, Sg);
      a[j][3] = bmul(((shl_fma<3>(Y) >> sh) & MAG) | ((Y * ms) & SG), Sg8);
    }
  }
}

constexpr int WS_THREADS = 384;

template <int FMT, int XM, int ROWT_ = 16, int TN_ = 128, bool RED = false, bool EARLY = false>
__global__ void __launch_bounds__(WS_THREADS, 1)
    qgemm_ws_kernel(const uint4 *__restrict__ w, const uint8_t *__restrict__ sc, int ntiles,
                    int K, float alpha, const __nv_bfloat16 *__restrict__ x, int ldx,
                    float *__restrict__ y, int ldy, int M, int N, int rbn, int splits, int units,
                    int kper, int mode, const uint4 *__restrict__ xp,
                    const __grid_constant__ CUtensorMap xmap) {
  using L = LgSmem<FMT, ROWT_, TN_>;
  constexpr int WQ = L::WQ, ROWT = L::ROWT, WS = L::WS, TN = L::TN;
  // ALT: 64 x 128 tile (ROWT 4): both consumer warpgroups work on the same 64-row block, each
  // on every other chunk (consumer wg takes chunks c % 2 == wg) with its own accumulator, and
  // the two accumulators are summed through shared memory before the store
  constexpr bool ALT = ROWT == 4 && TN == 128;
  constexpr int NMB = ALT ? 1 : ROWT / 8; // 64-row blocks per consumer warpgroup
  // EARLY (ALT only): a consumer releases its chunk's ring slot as soon as the chunk's wgmma
  // groups complete, instead of halfway through its next chunk (below)
  static_assert(!EARLY || ALT, "early slot release: 64 x 128 tiles");
  constexpr int TPW = TN / 4;   // tokens of a tile staged per producer warp
  constexpr bool BIG = ROWT == 16 && TN == 128; // only this tile splits K (modes 2-5)
  static_assert(BIG || !RED, "the split-K scratch layout is made for 256 x 128 tiles");
  static_assert(TN == 128 || XM != 1, "the x tile image (xperm_kernel) is made for 128-token tiles");
  static_assert(XM == 0 || XM == 1 || XM == 3, "x staging: 0, 1 or 3");
  static_assert(ALT || ROWT % 8 == 0, "row tiles: 4 (ALT), 8 or 16");
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
  // full[WS], then empty[WS]; ALT: then full1[WS], the full barriers of consumer 1's chunks
  // (each consumer waits only on its own chunks' barriers, so it sees every phase of them in
  // order, whichever consumer used a slot before)
  const uint32_t bars = s0 + WS * L::STAGE;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int KT = K / 64, KCH = K / 128;
  LGT_BEGIN(w);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < WS; s++) {
      mbar_init(bars + 8 * s, 128);
      mbar_init(bars + 8 * (WS + s), ALT ? 4 : 8); // ALT: only the chunk's consumer arrives
      if (ALT) mbar_init(bars + 8 * (2 * WS + s), 128);
    }
  }
  __syncthreads();
  LGT_PTR();

  // Programmatic dependent launch: the next kernel in the stream may be scheduled now (it
  // waits for this grid before touching memory); this grid's first weight chunks load before
  // griddepcontrol.wait, x and y only after it (no-ops without the launch attribute).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  if (warp < 4) {
    // ---- producer ----
    setmaxnreg_dec<40>();
    const int xt = lane >> 3, xch = 2 * ((lane >> 1) & 3) + (lane & 1);
    // packed weights and scales of chunk kc of row block brt0 into ring stage st
    auto load_w = [&](uint32_t st, int brt0, int kc) {
      const int kt0 = kc * 2;
      {
        // row tile r's chunk is 64 * WQ contiguous uint4 at (rt * KT + kt0) * 32 * WQ
        constexpr int PER = 64 * WQ, RSTEP = 128 / PER; // uint4 per row tile; row tiles per pass
        const int r0 = tid / PER, rem = tid % PER;
        const uint4 *wk = w + ((size_t)(brt0 + r0) * KT + kt0) * (32 * WQ) + rem;
        const size_t rs = (size_t)KT * 32 * WQ; // uint4 per row tile
        const int rlim = ntiles - 1 - brt0;
#pragma unroll
        for (int q = 0; q < ROWT / RSTEP; q++) {
          const int r = r0 + q * RSTEP;
          // XM 3: uint4 d of the chunk's weights at d ^ wsw_of(d) (conflict-free reads of the
          // quad's words in decode_a_nat)
          cp_async16s(st + 2 * L::XT + ((q * 128 + tid) ^ (XM == 3 ? wsw_of<FMT>(tid) : 0)) * 16, wk);
          if (r + RSTEP <= rlim) wk += RSTEP * rs; // past the last row tile: copy it again
          opaque(wk); // step the pointer here (hoisted per-copy offsets cost registers)
        }
      }
      if (FMT != DSV4C_FMT_FP8B) {
        constexpr int SU = L::S / 16 / ROWT > 0 ? L::S / 16 / ROWT : 1;
        if (tid < ROWT * SU) {
          const int r = tid / SU, rem = tid - r * SU;
          const int rt = min(brt0 + r, ntiles - 1);
          cp_async16s(st + 2 * L::XT + L::W + tid * 16, sc + ((size_t)rt * KCH + kc) * (SU * 16) + rem * 16);
        }
      }
    };
    // the first unit's first WS chunks: weights before the wait (they are not written by the
    // kernels this one depends on)
    int pre = 0;
    if ((int)blockIdx.x < units) {
      const int u = blockIdx.x, sp = u % splits, rb = (u / splits) % rbn;
      pre = LGT_NCH(min(WS, min(KCH - sp * kper, kper)));
      for (int c = 0; c < pre; c++) load_w(s0 + c * L::STAGE, rb * ROWT, sp * kper + c);
    }
    LGT(3);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    LGT(4);
    int slot = 0;
    uint32_t ph = 0;
    bool wrapped = false;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const int sp = u % splits, r2 = u / splits, rb = r2 % rbn, tb = r2 / rbn;
      const int brt0 = rb * ROWT, tok0 = tb * TN, c0 = sp * kper;
      const int nch = LGT_NCH(min(KCH - c0, kper));
      const int mrem = M - tok0 - warp * TPW; // tokens of this warp's TPW that exist
      const __nv_bfloat16 *xw = x + (size_t)(tok0 + warp * TPW) * ldx + 2 * lane;
      for (int c = 0; c < nch; c++) {
#define FB1 (ALT && (c & 1)) // ALT: chunk c is consumer 1's (its full barrier is full1[slot])
        if (wrapped) mbar_wait(bars + 8 * (WS + slot), ph ^ 1);
        LGT_CHUNK(16, u, c);
        const uint32_t st = s0 + slot * L::STAGE;
        if (pre > 0)
          pre--; // loaded before the wait
        else
          load_w(st, brt0, c0 + c);
        if (XM == 3) {
          // the chunk's two x tiles in natural order, 128-byte swizzled (chunk q of token m's
          // row at q ^ (m % 8)), by the tensor-memory accelerator (tokens past M read as zeros);
          // the consumers build A in natural order (decode_a_nat)
          if (tid == 0) {
            const uint32_t fb = bars + 8 * (FB1 ? 2 * WS + slot : slot);
            mbar_expect_tx(fb, 2 * L::XT);
#pragma unroll
            for (int h = 0; h < 2; h++) tma_load_2d(st + h * L::XT, &xmap, (c0 + c) * 128 + h * 64, tok0, fb);
          }
        } else if (XM == 1) {
          // the chunk's two x tiles are 32 contiguous KB of xp; thread 0 adds their bytes to
          // the slot's full barrier before its own arrival below
          if (tid == 0) {
            mbar_expect_tx(bars + 8 * (FB1 ? 2 * WS + slot : slot), 2 * L::XT);
            bulk_g2s(st, xp + ((size_t)tb * KT + 2 * (c0 + c)) * (L::XT / 16), 2 * L::XT,
                     bars + 8 * (FB1 ? 2 * WS + slot : slot));
          }
        } else {
          const uint32_t xs = st + warp * TPW * 128 + xt * 4;
          const __nv_bfloat16 *p = xw + (c0 + c) * 128;
#pragma unroll
          for (int m = 0; m < TPW; m++) {
            const bool ok = m < mrem;
#pragma unroll
            for (int h = 0; h < 2; h++)
              cp_async4(xs + h * L::XT + m * 128 + ((xch ^ (m & 7)) << 4), ok ? p + h * 64 : x, ok);
            p += ldx;
            opaque(p);
          }
        }
        cp_async_arrive(bars + 8 * (FB1 ? 2 * WS + slot : slot));
#undef FB1
        if (++slot == WS) {
          slot = 0;
          ph ^= 1;
          wrapped = true;
        }
      }
    }
    cp_wait<0>();
    LGT(5);
    if (BIG && !RED && mode >= 3) { // the consumers' cluster reduction (below)
      cluster_sync();
      cluster_sync();
    }
    LGT(6);
  } else {
    // ---- consumers ----
    setmaxnreg_inc<232>();
    asm volatile("griddepcontrol.wait;" ::: "memory"); // before the first store to y
    LGT(7);
    const int cw = warp - 4; // 0..7: warpgroup cw / 4, row tiles mb * 8 + cw (ALT: cw % 4)
    const int g = lane >> 2, t = lane & 3;
    const int wg = cw >> 2; // ALT: this consumer's chunks are c % 2 == wg
    float acc[NMB][TN / 2];
    uint32_t A[2][NMB][4][4]; // [tile h][row block mb]: the A fragments of 4 k16 steps
    int slot = 0;
    uint32_t ph = 0;
    uint32_t phb = 0; // ALT: bit s = the parity this consumer waits for next on slot s
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const int sp = u % splits, r2 = u / splits, rb = r2 % rbn, tb = r2 / rbn;
      const int brt0 = rb * ROWT, tok0 = tb * TN, c0 = sp * kper;
      const int nch = LGT_NCH(min(KCH - c0, kper));
#pragma unroll
      for (int mb = 0; mb < NMB; mb++)
#pragma unroll
        for (int i = 0; i < TN / 2; i++) acc[mb][i] = 0.f;
      int pslot = 0;
      for (int c = 0; c < nch; c++) {
        if (ALT && (c & 1) != wg) { // the other consumer's chunk: only step the ring
          if (++slot == WS) {
            slot = 0;
            ph ^= 1;
          }
          continue;
        }
        if (ALT) { // this consumer's phase of the slot's barrier
          mbar_wait(bars + 8 * (wg ? 2 * WS + slot : slot), (phb >> slot) & 1);
          phb ^= 1u << slot;
        } else {
          mbar_wait(bars + 8 * slot, ph);
        }
        LGT_ONCE(8);
        LGT_CHUNK(80, u, c);
        // x's cp.async writes (generic proxy) -> the tensor cores (XM 3: x comes by the async
        // proxy, nothing to fence)
        if (XM != 3) fence_async_smem();
        const uint8_t *st = smem + slot * L::STAGE + 2 * L::XT;
        const uint32_t xb0 = s0 + slot * L::STAGE;
        uint32_t fsw[NMB] = {};
        if (FMT == DSV4C_FMT_FP8B) {
#pragma unroll
          for (int mb = 0; mb < NMB; mb++)
            fsw[mb] = __ldg(sc + (size_t)min((brt0 >> 3) + mb, (ntiles - 1) >> 3) * (KT / 2) + c0 + c);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const uint32_t xb = xb0 + h * L::XT;
#pragma unroll
          for (int mb = 0; mb < NMB; mb++) {
            uint32_t(&a)[4][4] = A[h][mb];
            // the group that last read a (previous chunk, same tile) is done: 2 * NMB groups
            // per chunk, the 2 * NMB - 1 issued since stay queued
            wg_wait<2 * NMB - 1>();
            // so is every group of the previous chunk: its slot can be refilled
            // (ALT: this consumer's previous chunk, c - 2)
            if (!EARLY && (ALT ? c > 1 : c > 0) && mb == NMB - 1 && h == 1 && lane == 0)
              mbar_arrive(bars + 8 * (WS + pslot));
            const int rl = ALT ? (cw & 3) : mb * 8 + cw;
            if (XM == 3) {
              // natural input order: the quad's packed words of row tile rl, tile h, and the
              // scale words of the 16-input (NVFP4) or 32-input (MXFP4) blocks it spans
              uint32_t nsw[4];
#pragma unroll
              for (int j = 0; j < 4; j++) {
                if (FMT == DSV4C_FMT_NVFP4)
                  nsw[j] = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 128 + (4 * g + j) * 4);
                else if (FMT == DSV4C_FMT_MXFP4)
                  nsw[j] = *reinterpret_cast<const uint32_t *>(st + L::W + rl * 64 + g * 8 + (j >> 1) * 4);
                else
                  nsw[j] = fsw[mb];
              }
              decode_a_nat<FMT>(st + (rl * 2 + h) * 32 * WQ * 16, nsw, h, g, t, a);
            } else {
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
                sw = fsw[mb];
#pragma unroll
              for (int j = 0; j < 4; j++) decode_a<FMT>(wv, sw, h, j, a[j]);
            }
            wg_fence();
#pragma unroll
            for (int j = 0; j < 4; j++) wgmma_n<TN>(acc[mb], a[j], smem_desc(xb + j * 32, 16, 1024, 1));
            wg_commit();
          }
        }
        if (EARLY) {
          // The deferred release holds up to two slots per consumer (its current chunk and
          // the previous one), leaving one of the 5 slots of the ring to load into.
          wg_wait<0>();
          if (lane == 0) mbar_arrive(bars + 8 * (WS + slot));
        }
        pslot = slot;
        if (++slot == WS) {
          slot = 0;
          ph ^= 1;
        }
      }
      wg_wait<0>();
      LGT(9);
      if (!EARLY && (ALT ? nch > wg : nch > 0) && lane == 0) mbar_arrive(bars + 8 * (WS + pslot));
      if (ALT) {
        // Both consumers hold a partial sum of the same 64 x 128 tile. Consumer wg stores
        // tokens [64 wg, 64 wg + 64) of it (b in [8 wg, 8 wg + 8)) as acc0 + acc1 (the same sum
        // in either consumer: deterministic), getting the other consumer's half through RX
        // bytes of shared memory past the ring (never written by the producer): consumer 1
        // leaves its b < 8 half there, consumer 0 reads it and leaves its b >= 8 half in the same
        // place (each thread its own slots), then consumer 1 reads that.
        const int lt = (cw & 3) * 32 + lane;
        float4 *xr = reinterpret_cast<float4 *>(smem + WS * L::STAGE + 256) + lt;
        float v[32];
        if (wg == 1) {
#pragma unroll
          for (int b = 0; b < 8; b++)
            xr[b * 128] = make_float4(acc[0][4 * b], acc[0][4 * b + 1], acc[0][4 * b + 2], acc[0][4 * b + 3]);
        }
        named_sync(1, 256);
        if (wg == 0) {
#pragma unroll
          for (int b = 0; b < 8; b++) {
            const float4 q = xr[b * 128];
            v[4 * b] = (acc[0][4 * b] + q.x) * alpha;
            v[4 * b + 1] = (acc[0][4 * b + 1] + q.y) * alpha;
            v[4 * b + 2] = (acc[0][4 * b + 2] + q.z) * alpha;
            v[4 * b + 3] = (acc[0][4 * b + 3] + q.w) * alpha;
            xr[b * 128] = make_float4(acc[0][32 + 4 * b], acc[0][33 + 4 * b], acc[0][34 + 4 * b], acc[0][35 + 4 * b]);
          }
        }
        named_sync(1, 256);
        if (wg == 1) {
#pragma unroll
          for (int b = 0; b < 8; b++) {
            const float4 q = xr[b * 128];
            v[4 * b] = (q.x + acc[0][32 + 4 * b]) * alpha;
            v[4 * b + 1] = (q.y + acc[0][33 + 4 * b]) * alpha;
            v[4 * b + 2] = (q.z + acc[0][34 + 4 * b]) * alpha;
            v[4 * b + 3] = (q.w + acc[0][35 + 4 * b]) * alpha;
          }
        }
        // (consumer 1 writes RX again only after this unit's reads: the next unit's first
        // barrier orders consumer 0's reads before it)
        const int rowa = (brt0 + (cw & 3)) * 16 + g, toka = tok0 + 64 * wg + 2 * t;
        if (mode == 0 && (brt0 + ROWT) * 16 <= N && tok0 + TN <= M) {
          float *yb = y + (size_t)toka * ldy + rowa;
#pragma unroll
          for (int b = 0; b < 8; b++) {
#pragma unroll
            for (int e = 0; e < 4; e++) yb[(e & 1) * (size_t)ldy + 8 * (e >> 1)] = v[4 * b + e];
            yb += 8 * (size_t)ldy;
          }
          continue;
        }
#pragma unroll
        for (int b = 0; b < 8; b++) {
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int row = rowa + 8 * (e >> 1), tok = toka + 8 * b + (e & 1);
            if (row < N && tok < M) {
              float *dst = y + (size_t)tok * ldy + row;
              *dst = mode == 1 ? *dst + v[4 * b + e] : v[4 * b + e];
            }
          }
        }
        continue;
      }
      if (RED) {
        // Split-K through a scratch buffer (y points at it): the unit's partial tile (alpha
        // applied) in accumulator order, [unit][mb][b][consumer thread] float4, so that every
        // store instruction of a warpgroup writes 4 contiguous KB; splitk_reduce_kernel sums
        // the splits of each tile in split order into y.
        // Groups of 8 tokens wholly past M are not stored (splitk_reduce_kernel skips them).
        float4 *pp = reinterpret_cast<float4 *>(y) + (size_t)u * (NMB * (TN / 8) * 256) + (tid - 128);
#pragma unroll
        for (int mb = 0; mb < NMB; mb++)
#pragma unroll
          for (int b = 0; b < TN / 8; b++)
            if (tok0 + 8 * b < M)
              __stcg(pp + (mb * (TN / 8) + b) * 256, make_float4(acc[mb][4 * b] * alpha, acc[mb][4 * b + 1] * alpha,
                                                                 acc[mb][4 * b + 2] * alpha, acc[mb][4 * b + 3] * alpha));
        LGT(13);
        continue;
      }
      if (BIG && mode >= 3) {
        // Split-K inside a cluster of `splits` blocks (one unit each, the splits of one tile):
        // each block leaves its partial tile (alpha applied) in its own shared memory, [token]
        // [row] with a padded row stride, then block rank r sums rows [r, r + 1) * 256 / splits
        // of all partials through distributed shared memory and stores them (no atomics).
        constexpr int RS = 256 + 4; // floats per token; 2t * RS spreads t over the banks
        float *red = reinterpret_cast<float *>(smem);
        named_sync(1, 256); // both consumer warpgroups are done reading the ring
#pragma unroll
        for (int mb = 0; mb < NMB; mb++) {
          const int rowl = (mb * 8 + cw) * 16 + g;
#pragma unroll
          for (int b = 0; b < TN / 8; b++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              red[(8 * b + 2 * t + (e & 1)) * RS + rowl + 8 * (e >> 1)] = acc[mb][4 * b + e] * alpha;
        }
        LGT(10);
        cluster_sync();
        LGT(11);
        const uint32_t rank = cluster_rank();
        // rows per rank; float4 items of this rank (token-major) per consumer thread (<= 16)
        const int rr = 256 / splits, q4 = rr / 4, kn = TN * q4 / 256;
        float4 v[16];
#pragma unroll
        for (int k = 0; k < 16; k++) v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int r = 0; r < splits; r++) {
          const uint32_t base = mapa(s0, (uint32_t)r);
#pragma unroll
          for (int k = 0; k < 16; k++) { // all loads of one partial in flight at once
            if (k < kn) {
              const int i = tid - 128 + 256 * k, tl = i / q4;
              const int rl = (int)rank * rr + (i - tl * q4) * 4;
              const float4 p = ld_dsmem_f4(base + (uint32_t)(tl * RS + rl) * 4);
              v[k].x += p.x;
              v[k].y += p.y;
              v[k].z += p.z;
              v[k].w += p.w;
            }
          }
        }
        LGT(12);
#pragma unroll
        for (int k = 0; k < 16; k++) {
          if (k < kn) {
            const int i = tid - 128 + 256 * k, tl = i / q4;
            const int rl = (int)rank * rr + (i - tl * q4) * 4;
            const int tok = tok0 + tl, row = brt0 * 16 + rl;
            if (tok < M) {
              float *dst = y + (size_t)tok * ldy + row;
              const float vv[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
              for (int e = 0; e < 4; e++)
                if (row + e < N) dst[e] = mode == 4 ? dst[e] + vv[e] : vv[e];
            }
          }
        }
        LGT(13);
        cluster_sync(); // no block leaves while another reads its shared memory
        LGT(14);
        continue;
      }
      if (mode == 0 && (brt0 + ROWT) * 16 <= N && tok0 + TN <= M) {
        // the whole tile lies inside y: stores at offsets from one pointer, no bounds checks
        // (the checked loop below costs ~10 instructions a store: 11-17 % of wq_b's time)
        float *yb = y + (size_t)(tok0 + 2 * t) * ldy + (brt0 + cw) * 16 + g;
#pragma unroll
        for (int b = 0; b < TN / 8; b++) {
#pragma unroll
          for (int mb = 0; mb < NMB; mb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
              yb[(e & 1) * (size_t)ldy + mb * 128 + 8 * (e >> 1)] = acc[mb][4 * b + e] * alpha;
          yb += 8 * (size_t)ldy;
        }
        continue;
      }
#pragma unroll
      for (int mb = 0; mb < NMB; mb++) {
        const int row0 = (brt0 + mb * 8 + cw) * 16 + g;
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
    LGT(15);
  }
}

// xperm_kernel writes x [M][K] (bf16, row stride ldx2 input pairs) as the wgmma kernel's
// shared-memory x tiles, xp[tb][kt] = 128 tokens x 128 bytes (16 KB; tokens past M are zero):
// token m's input pair l = 8t + 2j + hi of 64-input tile kt goes to 16-byte chunk (2j + hi) ^
// (m % 8), word t, the image that the producer's 4-byte copies write. One thread per 16-byte
// chunk (coalesced stores; each warp reads 4 tokens x 32 bytes per load), grid-stride.
__global__ void __launch_bounds__(256) xperm_kernel(const uint32_t *__restrict__ x, int ldx2, int M,
                                                     int KT, long long total, uint4 *__restrict__ xp) {
  // the GEMM launched next (programmatic dependent launch) waits for this whole grid
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < total; i += (long long)gridDim.x * 256) {
    const int cp = (int)(i & 7), m = (int)((i >> 3) & 127);
    const long long tile = i >> 10; // tb * KT + kt
    const int kt = (int)(tile % KT), tok = (int)(tile / KT) * 128 + m;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (tok < M) {
      const uint32_t *r = x + (size_t)tok * ldx2 + kt * 32 + (cp ^ (m & 7)); // pair 8t + 2j + hi
      v.x = __ldg(r);
      v.y = __ldg(r + 8);
      v.z = __ldg(r + 16);
      v.w = __ldg(r + 24);
    }
    xp[i] = v;
  }
}

// splitk_reduce_kernel: y (+)= the sum over the splits, in split order (deterministic), of the
// partial 256 x 128 tiles that qgemm_ws_kernel stored in mode 5: part[tile * splits + split]
// holds 8,192 float4 in accumulator order ([mb][b][consumer thread], thread = 32 cw + 4 g + t:
// rows (16 rb + 8 mb + cw) * 16 + g (+ 8), tokens 128 tb + 8 b + 2 t (+ 1)); tile = tb * rbn +
// rb. One float4 per thread and step, all of its splits' loads in flight (groups of 8).
__global__ void __launch_bounds__(256) splitk_reduce_kernel(const float4 *__restrict__ part, int splits, long long total,
                                                            int rbn, float *__restrict__ y, int ldy, int M, int N,
                                                            int accumulate) {
  // the next kernel may be scheduled now; the partials are the previous grid's output
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (long long f = (long long)blockIdx.x * 256 + threadIdx.x; f < total; f += (long long)gridDim.x * 256) {
    const long long tile = f >> 13;
    const int rem = (int)(f & 8191);
    // groups of 8 tokens wholly past M: qgemm_ws_kernel did not store their partials
    if ((int)(tile / rbn) * 128 + 8 * ((rem >> 8) & 15) >= M) continue;
    const float4 *p = part + tile * splits * 8192 + rem;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += 8) {
      float4 q[8];
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (s0 + i < splits) q[i] = __ldcg(p + (size_t)(s0 + i) * 8192);
#pragma unroll
      for (int i = 0; i < 8; i++) {
        if (s0 + i < splits) {
          if (s0 + i == 0) {
            v = q[0];
          } else {
            v.x += q[i].x;
            v.y += q[i].y;
            v.z += q[i].z;
            v.w += q[i].w;
          }
        }
      }
    }
    const int mb = rem >> 12, b = (rem >> 8) & 15, thr = rem & 255;
    const int cw = thr >> 5, g = (thr >> 2) & 7, t = thr & 3;
    const int rb = (int)(tile % rbn), tb = (int)(tile / rbn);
    const int row = ((rb * 16 + mb * 8 + cw) * 16) + g, tok = tb * 128 + 8 * b + 2 * t;
    const float vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = row + 8 * (e >> 1), k = tok + (e & 1);
      if (r < N && k < M) {
        float *dst = y + (size_t)k * ldy + r;
        *dst = accumulate ? *dst + vv[e] : vv[e];
      }
    }
  }
}

// xperm_pool returns the current device's stream-ordered memory pool for xperm_kernel's output
// (created once per device; it keeps what it holds between calls, so a call allocates nothing
// from the driver once the largest x has been seen), or null.
static cudaMemPool_t xperm_pool() {
  static std::mutex mu;
  static cudaMemPool_t pools[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return nullptr;
  std::lock_guard<std::mutex> lk(mu);
  if (!pools[dev]) {
    cudaMemPoolProps pp = {};
    pp.allocType = cudaMemAllocationTypePinned;
    pp.location.type = cudaMemLocationTypeDevice;
    pp.location.id = dev;
    cudaMemPool_t p = nullptr;
    if (cudaMemPoolCreate(&p, &pp) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    uint64_t keep = ~0ull;
    (void)cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep);
    pools[dev] = p;
  }
  return pools[dev];
}

// launch_ws launches qgemm_ws_kernel<FMT, XM, ROWT, TN> on the work decomposition chosen by
// launch_wgmma: shared-memory opt-in, the split-K reduction (256 x 128 tiles only), programmatic
// dependent launch. Split-K (splits > 1) stores each unit's partial tile into a stream-ordered
// scratch buffer that splitk_reduce_kernel then sums into y in split order; without that
// buffer (DSV4GO_QGEMM_SPLITRED=0, no memory, or a graph capture with
// DSV4GO_QGEMM_XPERM_GRAPH=0) the splits are summed in a cluster when all clusters fit on the
// GPU at once, else with float32 atomics into y zeroed first.
//
// Why the scratch buffer (H200, 2026-11-30 06:51 call, %globaltimer probes per block, NVFP4
// wkv M = 2048, 27.6 us per call): clusters of 4 of this kernel do not all fit at once on the
// H200 (cudaOccupancyMaxActiveClusters), so wkv (and w1/w3 at M = 256, clusters of 8) ran on
// the atomics: the memset before the kernel and the launch without PDL left 2.9 us between the
// previous launch's last block and the first block of the next, and the 32,768 atomics per
// block took 6.9 us (median; 5.5-8.4) after the main loop. Clusters of 2 (where they fit) spent
// 9.7 us after the main loop, 5.7 of them in the distributed shared-memory loads (128 KB per
// block at ~23 GB/s). The scratch path stores 128 KB per block with whole-warpgroup 4 KB
// stores and reduces in a second PDL launch. Same call (07:11 UTC, cudabench, main 2995721's
// binary -> this one, NVFP4 / MXFP4 / FP8-block): wkv M = 2048 28.08 / 28.09 / 29.41 -> 25.73 /
// 25.92 / 27.69 us, wkv M = 256 13.70 / 13.29 / 13.84 -> 11.01 / 11.12 / 11.53, w1/w3 M = 256
// 21.16 / 20.60 / 21.95 -> 18.01 / 17.89 / 19.57, wo_b M = 256 39.90 / 38.24 / 45.42 -> 37.08
// / 36.70 / 42.79; the launches without split-K unchanged (within +-0.6 %). Its timeline (same
// call, probes): the GEMM's stores take 3.0 us after the main loop, and 4.9 us pass between one
// GEMM's last block and the next one's first (the reduction kernel and, in a graph, the scratch
// buffer's allocation and free nodes: a buffer kept across calls, not safe for concurrent
// streams and not kept, gave 25.00 instead of 25.74 us).
// x_tensor_map encodes the tensor map of x [M][K] (bf16, row stride ldx elements) for
// 64-input x box-token boxes with the 128-byte swizzle: the wgmma kernel's x tiles in natural
// input order (XM 3). cuTensorMapEncodeTiled is a driver function (host only, no GPU work),
// reached through the runtime's driver entry point so that nothing links libcuda. Returns
// DSV4C_ERR_SHAPE where it is unavailable or refuses the shape (the caller falls back).
inline int x_tensor_map(CUtensorMap *m, const void *x, int M, int K, int ldx, int box) {
  using Encode = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess)
      fn = nullptr;
#else
    if (cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q) != cudaSuccess) fn = nullptr;
#endif
    (void)cudaGetLastError();
    return q == cudaDriverEntryPointSuccess ? (Encode)fn : (Encode) nullptr;
  }();
  if (!encode) return DSV4C_ERR_SHAPE;
  const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)M};
  const cuuint64_t stride[1] = {(cuuint64_t)ldx * 2};
  const cuuint32_t boxd[2] = {64, (cuuint32_t)box}, es[2] = {1, 1};
  const CUresult r = encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(x), dim, stride, boxd, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : DSV4C_ERR_SHAPE;
}

template <int FMT, int XM, int ROWT = 16, int TN = 128, bool EARLY = false>
int launch_ws(const void *w, const void *sc, int ntiles, int N, int K, float alpha, const void *x,
              int ldx, float *y, int ldy, int M, int accumulate, int rb, int splits, int per,
              long long units, const void *xp, cudaStream_t st) {
  using L = LgSmem<FMT, ROWT, TN>;
  constexpr int SMEM = L::TOTAL + 2 * L::WS * 8;
  constexpr bool BIG = ROWT == 16 && TN == 128;
  auto kern = qgemm_ws_kernel<FMT, XM, ROWT, TN, false, EARLY>;
  auto kred = qgemm_ws_kernel<FMT, XM, ROWT, TN, BIG>; // mode 5 (same kernel when !BIG: unused)
  if (!BIG && splits != 1) return DSV4C_ERR_SHAPE; // no split-K reduction
  CUtensorMap xmap = {}; // XM 3: x [M][K] bf16, 64 x TN boxes, 128-byte swizzle
  if (XM == 3)
    if (int e = x_tensor_map(&xmap, x, M, K, ldx, TN)) return e;
  // DSV4GO_QGEMM_SPLITRED: -1 (default) and 1 reduce split-K through the scratch buffer, 0
  // through clusters or atomics (the previous kernel's way)
  static const int redmode = env_int("DSV4GO_QGEMM_SPLITRED", -1);
  static const bool redgraph = env_int("DSV4GO_QGEMM_XPERM_GRAPH", 1) != 0;
  const int sms = device_sms();
  static DeviceOnce smemOptIn, smemOptInRed; // per instantiation and device
  if (int e = opt_in_smem(smemOptIn, kern, SMEM)) return e;
  if (BIG && splits > 1)
    if (int e = opt_in_smem(smemOptInRed, kred, SMEM)) return e;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(WS_THREADS);
  cfg.dynamicSmemBytes = SMEM;
  cfg.stream = st;
  int mode = accumulate ? 1 : 0;
  // (64 x 128 tiles: releasing a ring slot right after its chunk's wgmma groups complete,
  // instead of during the consumer's next chunk, passed conformance but was no faster: H200,
  // 2026-11-30 08:03, wkv M = 2048 without the pre-pass, NVFP4 45.21 / 45.44 against 45.35 /
  // 45.58 us. Removed.)
  cudaLaunchAttribute at[2];
  float *part = nullptr; // this call's split-K scratch (mode 5)
  if (BIG && splits > 1 && redmode != 0) {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    const bool capturing = cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone;
    const size_t bytes = (size_t)units * 8192 * 16; // one 256 x 128 float32 tile per unit
    void *pb = nullptr;
    bool got = false;
    if (capturing) {
      got = redgraph && cudaMallocAsync(&pb, bytes, st) == cudaSuccess;
    } else {
      cudaMemPool_t pool = xperm_pool();
      got = pool && cudaMallocFromPoolAsync(&pb, bytes, pool, st) == cudaSuccess;
    }
    (void)cudaGetLastError();
    if (got) {
      part = (float *)pb;
      mode = 5;
    }
  }
  if (splits > 1 && mode != 5) {
    // Reduce the splits in a cluster when all clusters fit on the GPU at once, else atomics.
    static std::atomic<int> cache[64][3];
    if ((splits & (splits - 1)) == 0 && splits <= 8 &&
        (long long)max_clusters(kern, cfg, splits, cache) * splits >= units) {
      mode = accumulate ? 4 : 3;
      cluster_attr(at[0], splits);
      cfg.attrs = at;
      cfg.numAttrs = 1;
    } else {
      mode = 2;
      if (!accumulate) {
        cudaError_t e = ldy == N ? cudaMemsetAsync(y, 0, (size_t)M * N * sizeof(float), st)
                                 : cudaMemset2DAsync(y, (size_t)ldy * sizeof(float), 0,
                                                     (size_t)N * sizeof(float), M, st);
        if (e != cudaSuccess) return (int)e;
      }
    }
  }
  // Programmatic dependent launch (the kernel waits for the previous grid before it reads x
  // or writes y), except right after the split-K memset.
  if (!(mode == 2 && !accumulate)) {
    pdl_attr(at[cfg.numAttrs++]);
    cfg.attrs = at;
  }
  cfg.gridDim = dim3((mode == 3 || mode == 4) ? (unsigned)units : (unsigned)min(units, (long long)sms));
  (void)cudaGetLastError(); // clear a stale error of an earlier runtime call
  cudaError_t e = cudaLaunchKernelEx(&cfg, mode == 5 ? kred : kern, (const uint4 *)w, (const uint8_t *)sc, ntiles, K,
                                     alpha, (const __nv_bfloat16 *)x, ldx, mode == 5 ? part : y, ldy, M, N, rb,
                                     splits, (int)units, per, mode, (const uint4 *)xp, xmap);
  if (e == cudaSuccess && mode == 5) {
    static DeviceOnce carve; // keep the GEMM's shared-memory carve-out between the two launches
    (void)carve.run([] {
      return (int)cudaFuncSetAttribute(splitk_reduce_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    });
    (void)cudaGetLastError();
    const long long total = units / splits * 8192; // float4 of y's tiles
    cudaLaunchConfig_t rc = {};
    rc.blockDim = dim3(256);
    rc.gridDim = dim3((unsigned)min((total + 255) / 256, 4LL * sms)); // 60 registers: 4 blocks per SM
    rc.stream = st;
    cudaLaunchAttribute ra[1];
    pdl_attr(ra[0]);
    rc.attrs = ra;
    rc.numAttrs = 1;
    e = cudaLaunchKernelEx(&rc, splitk_reduce_kernel, (const float4 *)part, splits, total, rb, y, ldy, M, N, accumulate);
  }
  if (part) {
    const cudaError_t fe = cudaFreeAsync(part, st);
    if (e == cudaSuccess) e = fe;
  }
  if (e != cudaSuccess) return (int)e;
  return (int)cudaGetLastError();
}

template <int FMT>
int launch_wgmma(const void *w, const void *sc, int N, int npad, int K, float alpha, const void *x,
                 int ldx, float *y, int ldy, int M, int accumulate, int splits, cudaStream_t st) {
  using L = LgSmem<FMT>;
  // DSV4GO_QGEMM_XPERM: -1 (default) chooses the x pre-pass below, 0 never, 1 always (benchmarks, tests)
  static const int xpmode = env_int("DSV4GO_QGEMM_XPERM", -1);
  // DSV4GO_QGEMM_TILE: -1 (default) chooses the 128 x 64 tile by the rule below, 0 never, 1
  // whenever the caller leaves the split to this function (benchmarks, tests)
  static const int tilemode = env_int("DSV4GO_QGEMM_TILE", -1);
  // DSV4GO_QGEMM_XN: x tiles by tensor-map copies in natural input order, A built in natural
  // order by the consumers (XM 3, decode_a_nat): x is not permuted anywhere. -1 (default): on
  // every tile except where the 256 x 128 tiles would take the x pre-pass for an FP4 matrix of
  // more than 2,048 rows (there the consumers' dearer decode costs more than the pre-pass
  // saves: by the table below FP4 wq_b, wo_b and w2 at M = 2048, wq_b and wo_b at M = 256,
  // where XM 3 is within +-1 % on NVFP4 wo_b and MXFP4 w2) and where DSV4GO_QGEMM_XPERM=1 or
  // DSV4GO_QGEMM_ALTXP=1 forces the pre-pass; 0 never (the pre-pass, else 4-byte copies); 1 on
  // every tile; 2 the same as 1 but failing (DSV4C_ERR_SHAPE) instead of falling back where no
  // tensor map can be made (tests). Where the pre-pass gets no buffer, the 4-byte copies (same
  // bits as the pre-pass; see the 256 x 128 rule below).
  // H200, same call (2026-11-30 10:38 UTC, cudabench, two runs each, NVFP4 / MXFP4 / FP8-block,
  // us, XN=0 -> XN=1):
  //  - 64 x 128 tiles, wkv M = 2048: 25.0 / 25.1 / 28.1 -> 17.8 / 17.7 / 19.3 (was the pre-pass)
  //  - 128 x 64 tiles, w2 M = 256: 15.7 / 15.7 / 17.4 -> 12.6 / 12.0 / 13.9 (4-byte copies)
  //  - 256 x 128, 4-byte copies (no pre-pass): w1/w3 M = 256 18.0 / 17.9 / 19.6 -> 17.6 / 17.2 /
  //    19.0, wkv M = 256 11.0 / 11.0 / 11.5 -> 10.6 / 10.6 / 11.2
  //  - 256 x 128 with the pre-pass: w1/w3 M = 2048 59.9 / 58.3 / 70.1 -> 55.5 / 53.2 / 61.6;
  //    w2 M = 2048 59.0 / 57.6 / 70.2 -> 59.0 / 57.2 / 66.4; wo_b M = 2048 205.2 / 198.3 / 244.4
  //    -> 209.1 / 198.3 / 231.8, M = 256 37.1 / 36.5 / 42.5 -> 36.7 / 36.5 / 39.4; wq_b M = 2048
  //    235.2 / 228.6 / 291.3 -> 254.3 / 244.7 / 292.6, M = 256 35.5 / 34.9 / 41.8 -> 36.7 / 35.5 /
  //    41.1 (FP4 wq_b, and NVFP4 wo_b at M = 2048, keep the pre-pass: the rule above).
  //  Every case passed QGEMMConformance, QGEMMLargeM and GraphLargeM with XN=2, also with the
  //  64 x 128 or 128 x 64 tiles forced (ALT=1, TILE=1).
  //  An earlier layout (16-byte reads of the quad's words and selects, the weights not
  //  swizzled) was slower, FP8-block most (ptxas serialized its wgmma, C7513): 10:31 call.
  static const int xnmode = env_int("DSV4GO_QGEMM_XN", -1);
  const int ntiles = npad / 16;
  const int rb = (ntiles + L::ROWT - 1) / L::ROWT, tb = (M + 127) / 128;
  const int kch = K / 128, sms = device_sms();
  const bool auto_split = splits <= 0;
  if (auto_split) { // split K only while the grid stays under one wave, >= 2 chunks per split
    const long long blocks = (long long)rb * tb;
    splits = blocks >= sms ? 1 : sms / (int)blocks;
    splits = min(splits, max(1, kch / 2));
    while (splits & (splits - 1)) splits &= splits - 1; // a power of two (cluster sizes)
  }
  // per chunks per split; the splits stay as chosen (a power of two keeps the cluster
  // reduction), the last ones may get fewer chunks or none
  splits = max(1, min(splits, kch));
  const int per = (kch + splits - 1) / splits;
  // 128-row x 128-token tiles, K unsplit (each consumer warpgroup one 64-row block of the same x
  // chunk: half the 64 x 128 tiles' x bytes per MMA), where they fill 5/8 to 1 wave of the SMs
  // and N >= 2048 (w2 and wo_b at M = 257..512, w1/w3 at M = 641..1024), or up to two waves
  // with K of at most 8 chunks (wq_b at M <= 128). H200, 2026-12-01 15:05 call, NVFP4 us, the
  // dispatch before against these tiles: w2 at M = 320 / 384 / 512 19.35 / 18.76 / 19.06 ->
  // 16.06 / 16.56 / 16.57; wo_b 57.65 / 58.35 / 64.79 -> 54.26 / 54.47 / 55.88; w1/w3 at M =
  // 1024 39.22 -> 29.34; wq_b at M = 96 / 128 21.43 / 20.37 -> 18.76 / 18.46. Slower with half
  // a wave or less (w2, wo_b at M <= 256, w1/w3 at M <= 512: 1.09-2.9x) and with more waves of
  // longer K (wo_b at M = 1024 1.07x; w1/w3, w2, wq_b at M = 2048 1.02-1.10x).
  // DSV4GO_QGEMM_T128: -1 (default) by this rule, 0 never, 1 whenever the caller leaves the split
  // to this function (tests).
  static const int t128 = env_int("DSV4GO_QGEMM_T128", -1);
  if (auto_split && t128 != 0 && xnmode != 0) {
    const int rb8 = (ntiles + 7) / 8;
    const long long u128 = (long long)rb8 * tb;
    if (u128 <= 0x7fffffff &&
        (t128 > 0 || (rb8 >= 16 && 8 * u128 >= 5LL * sms && u128 <= sms) || (kch <= 8 && u128 > sms && u128 <= 2LL * sms))) {
      const int r = launch_ws<FMT, 3, 8, 128>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb8, 1, kch, u128, nullptr, st);
      if (r != DSV4C_ERR_SHAPE || t128 > 0) return r;
    }
  }
  // 128-row x 64-token tiles, K unsplit, where 256 x 128 tiles would split K into splits of
  // <= 4 chunks and the small tiles fill 7/8 to 1 wave of the SMs (expert w2 at M = 256: 128
  // tiles). A split-K launch costs ~8 us more than an unsplit one even with no chunks to run
  // (H200, wkv M = 2048 with the main loop skipped: 11.4 us for 4 splits in clusters, 11.6
  // with atomics, 3.5 unsplit), but a 128 x 64 x 128 chunk takes ~0.8 us against ~1.9 for a
  // 256 x 128 x 128 one with 4x the work (not profiled; per flop it has twice the A decode
  // and the x staging, and n64 wgmma). Same calls (05:03 and 05:10 UTC, NVFP4 / MXFP4 /
  // FP8-block): w2 M = 256 20.6 / 20.8 / 22.3 -> 15.7 / 15.9 / 17.5 us. Slower where the
  // splits are longer (05:03, a first rule that took this tile wherever the 256 x 128 tiles
  // were fewer than the SMs): wkv M = 2048 (8 chunks per split) 27.4 -> 29.4 us, wo_b M = 256
  // (16) 44.3 -> 57.0, w1/w3 M = 2048 (unsplit 256 x 128 tiles) 65.1 -> 115.3.
  if (auto_split && tilemode != 0) {
    const int rb8 = (ntiles + 7) / 8, tb64 = (M + 63) / 64;
    const long long small = (long long)rb8 * tb64;
    if (small <= 0x7fffffff &&
        (tilemode > 0 || (splits > 1 && per <= 4 && 8 * small >= 7LL * sms && small <= sms)))
    {
      if (xnmode != 0) {
        const int r = launch_ws<FMT, 3, 8, 64>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb8, 1, kch, small, nullptr, st);
        if (r != DSV4C_ERR_SHAPE || xnmode == 2) return r;
      }
      return launch_ws<FMT, 0, 8, 64>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb8, 1, kch, small, nullptr, st);
    }
  }
  // While the stream is being captured into a CUDA graph the pass's buffer is a graph
  // allocation node (cudaMallocAsync from the device's default pool; the private pool is not
  // created or used during a capture). Checked on the H200 (2026-11-30 05:22 call):
  // TestGraphLargeM replays bit for bit, and captured M = 2048 NVFP4 calls took wo_b 204.7
  // against 245.8 us without the pass, wq_b 236.8 against 293.6, w1/w3 59.7 against 65.2.
  // DSV4GO_QGEMM_XPERM_GRAPH=0: a captured call stages x with 4-byte copies where the pre-pass
  // would run (same bits; and the graph has no allocation and free nodes, which
  // cudaGraphAddChildGraphNode refuses).
  static const bool xpgraph = env_int("DSV4GO_QGEMM_XPERM_GRAPH", 1) != 0;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  const bool capturing = cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone;
  // with_xp runs xperm_kernel into a stream-ordered buffer, then launch(xp), then frees the
  // buffer, and returns true with the result in *r; false (nothing launched) when no buffer
  // could be had: the caller then stages x with 4-byte copies.
  auto with_xp = [&](auto launch, int *r) -> bool {
    if (capturing && !xpgraph) return false;
    const long long total = (long long)tb * (K / 64) * 1024; // 16-byte chunks of xp
    void *xp = nullptr;
    bool got = false;
    if (capturing) {
      got = cudaMallocAsync(&xp, (size_t)total * 16, st) == cudaSuccess;
    } else {
      cudaMemPool_t pool = xperm_pool();
      got = pool && cudaMallocFromPoolAsync(&xp, (size_t)total * 16, pool, st) == cudaSuccess;
    }
    if (!got) {
      (void)cudaGetLastError(); // no pool or no memory
      return false;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(256);
    cfg.gridDim = dim3((unsigned)min((total + 255) / 256, 4LL * sms));
    cfg.stream = st; // after the allocation: an ordinary launch
    (void)cudaGetLastError();
    cudaError_t e = cudaLaunchKernelEx(&cfg, xperm_kernel, (const uint32_t *)x, ldx / 2, M, K / 64, total, (uint4 *)xp);
    *r = (int)e;
    if (e == cudaSuccess) *r = launch(xp);
    const cudaError_t fe = cudaFreeAsync(xp, st);
    if (!*r) *r = (int)fe;
    return true;
  };
  // 64-row x 128-token tiles, K unsplit, the two consumer warpgroups taking alternate chunks
  // of one 64-row block (ALT in qgemm_ws_kernel), where 256 x 128 tiles would split K, K has
  // at most 32 chunks (each x tile is read from L2 once per 64 rows: 4x the 256-row tile's x
  // traffic) and the 64 x 128 tiles fill 7/8 to 1 wave of the SMs (attn wkv at M = 2048: 128
  // tiles; not wo_b at M = 256, 64 chunks): no split-K reduction and no second launch.
  // Same call (H200, 2026-11-30 07:55 UTC, cudabench, main 264a6d8's binary -> this one, two
  // interleaved runs each, x pre-pass on, slots released during the consumer's next chunk):
  // wkv M = 2048 NVFP4 25.74 / 25.78 -> 25.02 / 25.20 us, MXFP4 25.97 / 25.87 -> 25.07 / 25.20,
  // FP8-block 27.96 / 27.98 -> 27.27 / 27.34 (-2.4..-3.0 %; 43.2 % of the 791.5 TFLOP/s dense
  // bf16 rate, not the ~17 us estimated from session 5's per-chunk time; a guess, not
  // profiled: x is read from L2 once per 64-row block, 8 times, 128 MB for wkv against 32 MB
  // with the split 256-row tiles); every other row of the table (other instantiations, SASS
  // identical) within -0.5..+0.6 %. Conformance (same call): LargeM|Conformance|Graph, and
  // QGEMMLargeM|GraphLargeM with DSV4GO_QGEMM_ALT=1.
  // DSV4GO_QGEMM_ALT: -1 (default) by that rule, -2 by the rule before session 20 (below), 0
  // never (main 264a6d8's dispatch), 1 whenever
  // the caller leaves the split to this function (tests). DSV4GO_QGEMM_ALTXP: x pre-pass for
  // these tiles: -1 (default) by the rule below where XM 3 does not run (XN=0), 0 never, 1
  // always (and XM 3 off unless XN > 0). Session 6-7 measurements, before XM 3: without the
  // pre-pass these tiles were far slower with the 4-byte copies (08:03 call, wkv M = 2048: NVFP4 45.35 / 45.58 against 25.06 / 25.03 us, MXFP4
  // 45.95 / 45.70 against 25.01 / 25.06, FP8-block 46.09 / 46.08 against 27.05 / 27.15; each
  // 64-row tile reads all of x, so the bulk copies of the pre-pass matter most here).
  static const int altmode = env_int("DSV4GO_QGEMM_ALT", -1);
  static const int altxp = env_int("DSV4GO_QGEMM_ALTXP", -1);
  // DSV4GO_QGEMM_ALTREL: 0 releases a ring slot halfway through the consumer's next chunk (the
  // kernel before 2026-12-01), 1 as soon as the chunk's wgmma groups complete (EARLY), -1
  // (default) EARLY where the last token tile is at most half full. Same calls (14:20, ALT=1,
  // EARLY against the later release, NVFP4 / FP8-block us): w2 at M = 160 / 192 15.28 / 14.36
  // against 18.87 / 15.96, FP8-block 16.66 / 15.04 against 19.52 / 16.47; wo_b at M = 160
  // 58.36 against 73.89; with whole or 3/4-full last tiles EARLY was 0-3 % slower.
  static const int altrel = env_int("DSV4GO_QGEMM_ALTREL", -1);
  if (auto_split && altmode != 0) {
    const int rb4 = (ntiles + 3) / 4;
    const long long alt = (long long)rb4 * tb;
    // Also where K has at most 16 chunks and the 64 x 128 tiles fill about half a wave or more:
    // expert w2 (4096 x 2048) at M = 96 / 128, NVFP4, 10.24 / 9.91 us with these tiles (ALT=1)
    // against 13.97 / 13.87 split (H200, 2026-12-01 12:17 call; w1/w3, wq_b, wo_b and wkv at M =
    // 96 / 128, with 32 chunks or more than a wave of these tiles, were slower with them).
    const bool half = kch <= 16 && 25 * alt >= 12LL * sms;
    // Session 20 (H200, 2026-12-01 14:04 and 14:20 calls, ALT=1 against the split 256 x 128
    // tiles, NVFP4 / FP8-block us): also (a) from 5/8 of a wave where K has at most 32 chunks:
    // w1/w3 at M = 320 / 384 (96 tiles) 18.17 / 17.52 against 22.59 / 23.13, FP8-block 20.05 /
    // 19.40 against 24.29 / 24.75; (b) up to two waves where K has at most 16 chunks: w2 at M =
    // 320 / 384 / 512 (192-256 tiles) 19.20 / 18.97 / 19.29 against 24.28 / 24.84 / 27.73,
    // FP8-block 21.06 / 20.76 / 21.32 against 25.78 / 26.16 / 28.67; (c) a wave of whole
    // 128-token tiles with 64 chunks: wo_b at M = 256, 32.92 against 37.36, FP8-block 36.32
    // against 40.08 (at M = 160..224, with a partial last token tile, and at M = 384, 1.5
    // waves, it was 1.08-2.0x slower). Below 5/8 of a wave (w1/w3 at M = 96..256: 64 tiles or
    // fewer) the split tiles stay within 3 % or faster.
    const bool wider = altmode != -2 && ((kch <= 32 && 8 * alt >= 5LL * sms && alt <= sms) ||
                       (kch <= 16 && alt > sms && alt <= 2LL * sms) ||
                       (kch <= 64 && M % 128 == 0 && 8 * alt >= 7LL * sms && alt <= sms)); // -2: not (A/B)
    if (alt <= 0x7fffffff &&
        (altmode > 0 || (splits > 1 && ((kch <= 32 && (8 * alt >= 7LL * sms || half) && alt <= sms) || wider)))) {
      const long long pb = (alt + sms - 1) / sms * kch; // chunks per block
      int r = 0;
      // XM 3 first (ALTXP=1 forces the pre-pass instead unless XN > 0); where the pre-pass
      // gets no buffer, the 4-byte copies (the pre-pass's bits: below)
      if (xnmode > 0 || (xnmode < 0 && altxp <= 0)) {
        const bool early = altrel > 0 || (altrel < 0 && M % 128 != 0 && M % 128 <= 64);
        r = early
                ? launch_ws<FMT, 3, 4, 128, true>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb4, 1, kch, alt, nullptr, st)
                : launch_ws<FMT, 3, 4, 128>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb4, 1, kch, alt, nullptr, st);
        if (r != DSV4C_ERR_SHAPE || xnmode == 2) return r;
      }
      if ((altxp > 0 || (altxp < 0 && rb4 >= 4 && pb >= 8)) &&
          with_xp([&](const void *xp) {
            return launch_ws<FMT, 1, 4, 128>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb4, 1, kch, alt, xp, st);
          }, &r))
        return r;
      return launch_ws<FMT, 0, 4, 128>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb4, 1, kch, alt, nullptr, st);
    }
  }
  const long long units = (long long)rb * tb * splits;
  if (units > 0x7fffffff || splits > 65535) return DSV4C_ERR_SHAPE;
  // x in the tile layout (xperm_kernel) when each x tile is staged by >= 4 row blocks and each
  // block runs >= 8 chunks: then the bulk copies save more than the pass costs (it reads and
  // writes x once).
  const long long per_block = (units + sms - 1) / sms * per;
  const bool prepass = xpmode > 0 || (xpmode < 0 && rb >= 4 && per_block >= 8);
  // XM 3 (DSV4GO_QGEMM_XN above) unless the pre-pass is forced (XPERM=1) or would run for an
  // FP4 matrix of more than 2,048 rows. Where the pre-pass then gets no buffer (a capture with
  // DSV4GO_QGEMM_XPERM_GRAPH=0, no pool memory), the 4-byte copies, not XM 3, although XM 3 is
  // faster: they sum K in the pre-pass's order (XM 3 sums the same products in natural order,
  // so the last bits differ), and a call's result should not depend on whether it was captured
  // or on free memory (TestGraphLargeM with XPERM_GRAPH=0: H200, 11:10 call, XM 3 there gave
  // -11.787859 against -11.787852 eagerly).
  if (xnmode > 0 || (xnmode < 0 && xpmode <= 0 && !(prepass && FMT != DSV4C_FMT_FP8B && N > 2048))) {
    const int r = launch_ws<FMT, 3>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb, splits, per, units, nullptr, st);
    if (r != DSV4C_ERR_SHAPE || xnmode == 2) return r;
  }
  int r = 0;
  if (prepass && with_xp([&](const void *xp) {
        return launch_ws<FMT, 1>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb, splits, per, units, xp, st);
      }, &r))
    return r;
  return launch_ws<FMT, 0>(w, sc, ntiles, N, K, alpha, x, ldx, y, ldy, M, accumulate, rb, splits, per, units, nullptr, st);
}

} // namespace

int dsv4c_qgemm_large_ok() {
  static const int off = env_int("DSV4GO_QGEMM_WGMMA", 1) == 0;
  if (off) return 0;
  static std::atomic<int> cc[64]; // per device ordinal: 0 = unknown, 1 = sm_90, 2 = other
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 0;
  if (dev >= 64) return 0;
  int v = cc[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int maj = 0, min = 0;
    cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev);
    v = (maj == 9 && min == 0) ? 1 : 2;
    cc[dev].store(v, std::memory_order_relaxed); // racing callers store the same value
  }
  return v == 1;
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
