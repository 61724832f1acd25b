// qgemm_common.cuh: device helpers shared by the quantized GEMM/GEMV kernels (qgemm.cu,
// qgemv_stream.cu, qgemm_large.cu): exact in-register dequantization of the packed tiles of
// kernels/cuda/pack.go into bf16 mma.sync A fragments, cp.async and streaming loads, and the
// accumulator epilogue. Private to kernels/cuda/csrc (not part of the Go ABI, dsv4cuda.h).
// Everything sits in an anonymous namespace: each translation unit gets its own copy.
#ifndef DSV4CUDA_QGEMM_COMMON_CUH
#define DSV4CUDA_QGEMM_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "dsv4cuda.h"
#include "swiglu.cuh"

namespace {

constexpr int KC = 128;      // K per staged chunk
constexpr int XPAD = KC + 8; // padded smem row, in bf16 elements (272 bytes)

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

// bmul_lo / bmul_hi multiply the bf16 pair a by b's low / high half in both lanes.
__device__ __forceinline__ uint32_t bmul_lo(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&a), __low2bfloat162(*reinterpret_cast<__nv_bfloat162 *>(&b)));
  return *reinterpret_cast<uint32_t *>(&r);
}
__device__ __forceinline__ uint32_t bmul_hi(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&a), __high2bfloat162(*reinterpret_cast<__nv_bfloat162 *>(&b)));
  return *reinterpret_cast<uint32_t *>(&r);
}

// broadcast scale code byte i of w into a bf16 pair: code*smul + sadd in each half.
template <int SMUL, int SADD>
__device__ __forceinline__ uint32_t scale_pair(uint32_t w, int i) {
  uint32_t x = prmt(w, 0u, 0x4040u | (uint32_t)i | ((uint32_t)i << 8));
  return x * (uint32_t)SMUL + (uint32_t)SADD * 0x10001u;
}

// shl_fma returns v << S computed as an integer multiply (IMAD on the FMA pipe): the E2M1
// decode below is bound by the integer ALU pipe (LOP3, SHF: half rate on sm_90) while the FMA
// pipe carries only the block-scale multiplies, so its left shifts go there.
template <int S> __device__ __forceinline__ uint32_t shl_fma(uint32_t v) {
  uint32_t r;
  asm("mul.lo.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "n"(1u << S));
  return r;
}

// E2M1 word -> 4 bf16x2 registers (a0a1, a2a3, a4a5, a6a7), each e2m1 * 2^-126: sign at bf16
// bit 15, exponent and mantissa at bits 8..6. kernels/cuda/pack.go (e2m1MagShift,
// e2m1SignShift) places the 32 code bits so that every register is a left shift (or, for a6a7's
// magnitudes, a right shift) of q, masked: 6 LOP3 and 1 SHF on the ALU pipe and 4 IMAD on the
// FMA pipe per 8 values (was 6 LOP3 and 5 funnel shifts, all on the ALU pipe).
__device__ __forceinline__ void dec_e2m1(uint32_t q, uint32_t (&a)[4]) {
  const uint32_t M = 0x81C081C0u, MAG = 0x01C001C0u, SG = 0x80008000u;
  a[0] = shl_fma<6>(q) & M;
  a[1] = (shl_fma<3>(q) & MAG) | (shl_fma<1>(q) & SG);
  a[2] = q & M;
  a[3] = ((q >> 4) & MAG) | (shl_fma<2>(q) & SG);
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

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
// cp_async16_if copies 16 bytes when p holds and does nothing otherwise (a predicated
// instruction, no branch: the address is not accessed when p is false, so it may lie past the
// end of the weights).
__device__ __forceinline__ void cp_async16_if(void *smem, const void *gmem, bool p) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(s),
               "l"(gmem), "r"((int)p));
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

// decode_a builds the bf16 A fragment of k16 step j (0..3) of 64-input tile h (0, 1 within
// the 128-input chunk) from the tile's WQ packed words tw and the chunk's scale word sw.
// SWZ (FP4): rows g and g + 8's scales made as one bf16 pair and broadcast by the multiply's
// operand swizzle (HMUL2 .H0_H0 / .H1_H1, no instruction of its own) instead of two broadcast
// pairs: 2 instructions fewer per unit and 64-input tile. The streaming and predecode kernels
// use it (qgemv_stream.cu's loop step: 456 -> 450 instructions; routed layer at one token 25.57
// against 26.27 us, 2026-12-01 04:05); the earlier kernels of qgemm.cu do not (wo_b at M = 16,
// NVFP4 / MXFP4: 11.87 / 11.89 us with it, 11.15 / 10.83 without).
template <int FMT, bool SWZ = false>
__device__ __forceinline__ void decode_a(const uint4 *tw, uint32_t sw, int h, int j,
                                         uint32_t (&a)[4]) {
  constexpr int SMUL = Fmt<FMT>::SMUL, SADD = Fmt<FMT>::SADD;
  if (FMT == DSV4C_FMT_FP8B) {
    const uint32_t S = scale_pair<SMUL, SADD>(sw, 0);
    const uint32_t w0 = comp(tw[j >> 1], (j & 1) * 2);
    const uint32_t w1 = comp(tw[j >> 1], (j & 1) * 2 + 1);
    a[0] = bmul(dec_e4m3(w0, 0), S);
    a[1] = bmul(dec_e4m3(w0, 2), S);
    a[2] = bmul(dec_e4m3(w1, 0), S);
    a[3] = bmul(dec_e4m3(w1, 2), S);
  } else if (SWZ) {
    const uint32_t S2 = prmt(sw, 0u, 0x4040u | (uint32_t)(h * 2) | ((uint32_t)(h * 2 + 1) << 8)) * (uint32_t)SMUL +
                        (uint32_t)SADD * 0x10001u;
    uint32_t d[4];
    dec_e2m1(comp(tw[0], j), d);
    a[0] = bmul_lo(d[0], S2);
    a[1] = bmul_hi(d[1], S2);
    a[2] = bmul_lo(d[2], S2);
    a[3] = bmul_hi(d[3], S2);
  } else {
    const uint32_t Sg = scale_pair<SMUL, SADD>(sw, h * 2);
    const uint32_t Sg8 = scale_pair<SMUL, SADD>(sw, h * 2 + 1);
    uint32_t d[4];
    dec_e2m1(comp(tw[0], j), d);
    a[0] = bmul(d[0], Sg);
    a[1] = bmul(d[1], Sg8);
    a[2] = bmul(d[2], Sg);
    a[3] = bmul(d[3], Sg8);
  }
}

// group_expert returns the expert that group grp of a grouped launch uses: ids[grp], read after
// griddepcontrol.wait because the ids are the previous kernel's (the router's) output, or grp
// itself when ids is NULL (one matrix, or groups in order). Callers leave the group untouched
// when the result is outside [0, E); the test is uniform per block.
__device__ __forceinline__ int group_expert(const int *ids, int grp) {
  if (!ids) return grp;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  return ids[grp];
}

// scale_ptr returns this lane's first scale byte for row tile rt from 64-input tile kt0 (even)
// on, in kernels/cuda/pack.go's layout: NVFP4 128 bytes and MXFP4 64 bytes per (row tile,
// 128-input chunk), this lane's 4-byte word of them; FP8-block one byte per (128-row block,
// 128-input block).
template <int FMT>
__device__ __forceinline__ const uint8_t *scale_ptr(const uint8_t *sc, int rt, int KT, int kt0, int lane) {
  if (FMT == DSV4C_FMT_NVFP4) return sc + ((size_t)rt * KT + kt0) / 2 * 128 + lane * 4;
  if (FMT == DSV4C_FMT_MXFP4) return sc + ((size_t)rt * KT + kt0) / 2 * 64 + (lane >> 2) * 8 + ((lane & 3) >> 1) * 4;
  return sc + (size_t)(rt >> 3) * (KT / 2) + (kt0 >> 1);
}

// store_acc writes a warp's accumulators: row tiles rt0 .. rt0+RT-1 (rows past N skipped),
// n8 token tiles from tok0 (tokens past M skipped); c0 = (row g, tok 2t), c1 = (g, 2t+1),
// c2 = (g+8, 2t), c3 = (g+8, 2t+1). atomic: float32 atomicAdd (split-K); else store, or add
// to y when accumulate.
template <int RT, int MT>
__device__ __forceinline__ void store_acc(const float (&acc)[RT][MT][4], int rt0, int ntiles,
                                          int tok0, float scale, float *y, int ldy, int M, int N,
                                          int lane, bool atomic, bool accumulate) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < RT; r++) {
    const int rt = rt0 + r;
    if (rt >= ntiles) continue;
#pragma unroll
    for (int n = 0; n < MT; n++) {
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int row = rt * 16 + g + ((q >> 1) << 3);
        const int tok = tok0 + n * 8 + 2 * t + (q & 1);
        if (row < N && tok < M) {
          float v = acc[r][n][q] * scale;
          float *dst = y + (size_t)tok * ldy + row;
          if (atomic)
            atomicAdd(dst, v);
          else
            *dst = accumulate ? *dst + v : v;
        }
      }
    }
  }
}

// ---- host side ----

// cluster_attr fills a launch attribute asking for thread-block clusters of x by y blocks.
inline void cluster_attr(cudaLaunchAttribute &a, int x, int y = 1) {
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = x;
  a.val.clusterDim.y = y;
  a.val.clusterDim.z = 1;
}

// pdl_attr fills a launch attribute allowing programmatic dependent launch: the kernel may be
// scheduled before the previous one in the stream completes, and waits for it with
// griddepcontrol.wait.
inline void pdl_attr(cudaLaunchAttribute &a) {
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
}

// max_clusters returns how many clusters of cl blocks (2, 4 or 8) of the kernel (cfg: its block
// and shared memory) can be resident at once on the current device, cached per device ordinal
// and cluster size (cache: one per kernel, zero-initialized); 0 if unknown.
template <typename Kern>
int max_clusters(Kern kern, cudaLaunchConfig_t cfg, int cl, std::atomic<int> (&cache)[64][3]) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  const int i = cl == 2 ? 0 : cl == 4 ? 1 : cl == 8 ? 2 : -1;
  if (i < 0) return 0;
  int v = cache[dev][i].load(std::memory_order_relaxed);
  if (v == 0) {
    cudaLaunchAttribute at[1];
    cluster_attr(at[0], cl);
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cfg.gridDim = dim3(cl);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) n = 0;
    (void)cudaGetLastError();
    v = n + 1; // racing callers store the same value
    cache[dev][i].store(v, std::memory_order_relaxed);
  }
  return v - 1;
}

// env_int reads an integer environment switch (benchmark knobs), def when unset or empty.
inline int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return (v && v[0]) ? atoi(v) : def;
}

// env_flag reports whether an environment switch is set to 1.
inline bool env_flag(const char *name) {
  const char *v = getenv(name);
  return v && v[0] == '1';
}

// device_sms returns the current device's SM count (132 if it cannot be queried), for grid
// sizing.
inline int device_sms() {
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) == cudaSuccess)
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms;
}

// DeviceOnce applies a per-device setting once per device ordinal (cudaFuncSetAttribute acts on
// the current device only, so a kernel's dynamic shared-memory opt-in must be made on every
// device it runs on). Devices past 63 are set on every call. Benign race: settings are
// idempotent. Use one static DeviceOnce per kernel instantiation.
struct DeviceOnce {
  std::atomic<unsigned long long> done{0};
  // run calls set() (returning 0 or a cudaError_t) unless it already succeeded on the current
  // device; returns its result.
  template <typename F> int run(F set) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return (int)e;
    const unsigned long long bit = dev < 64 ? 1ull << dev : 0;
    if (bit && (done.load(std::memory_order_relaxed) & bit)) return 0;
    const int r = set();
    if (r == 0 && bit) done.fetch_or(bit, std::memory_order_relaxed);
    return r;
  }
};

// smem_two_blocks returns the dynamic shared memory per block (bytes) above which a third block
// no longer fits on an SM of the current device (3 x (bytes + reserved per block) > the SM's
// shared memory), 0 if unknown.
inline int smem_two_blocks() {
  int dev = 0, sm = 0, res = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&res, cudaDevAttrReservedSharedMemoryPerBlock, dev) != cudaSuccess)
    return 0;
  return max(0, sm / 3 - res + 16);
}

// smem_optin_max returns the current device's largest dynamic shared memory per block (bytes)
// that a kernel may opt in to (227 KB on sm_90, 99 KB on sm_120), or 48 KB if unknown.
inline int smem_optin_max() {
  int dev = 0, v = 48 * 1024;
  if (cudaGetDevice(&dev) == cudaSuccess)
    cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  return v;
}

// opt_in_smem raises kern's dynamic shared-memory limit to bytes on the current device, once
// per device (once holds that state); 0 or a cudaError_t.
template <typename K> int opt_in_smem(DeviceOnce &once, K kern, int bytes) {
  return once.run([&] { return (int)cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); });
}

// ---- the streaming decode GEMV (qgemv_stream.cu) ----

// Per-format unit geometry: a unit is one row tile (16 rows) x one 128-input chunk.
// Zero bf16 after x that token rows past M read instead (covers the B loads of UP <= 2 units).
constexpr int ZSTRIP = 256;

template <int FMT> struct Unit {
  static constexpr int WQ = Fmt<FMT>::WQ;
  static constexpr int WBYTES = 1024 * WQ; // packed weights: 2 tiles x 32 lanes x WQ x 16 B
  static constexpr int SBYTES = FMT == DSV4C_FMT_NVFP4 ? 128 : FMT == DSV4C_FMT_MXFP4 ? 64 : 0;
  static constexpr int SLOT = WBYTES + (SBYTES ? 128 : 0); // ring slot, 128-byte aligned
};

// swiglu_bf16 is dsv4c_swiglu's element (ops.cu): swiglu_f32 (swiglu.cuh) rounded to bf16
// (TestQGEMMGroupedSwiGLU checks the bits against dsv4c_swiglu, TestQGEMMMoE through
// Stream.SwiGLU).
__device__ __forceinline__ __nv_bfloat16 swiglu_bf16(float g, float u, float limit) {
  return __float2bfloat16_rn(swiglu_f32(g, u, limit));
}

// swiglu8 is swiglu_bf16 of 8 gate / up values, packed as one 16-byte piece of bf16 x.
__device__ __forceinline__ uint4 swiglu8(float4 g0, float4 g1, float4 u0, float4 u1, float limit) {
  union {
    __nv_bfloat16 h[8];
    uint4 v;
  } r;
  r.h[0] = swiglu_bf16(g0.x, u0.x, limit);
  r.h[1] = swiglu_bf16(g0.y, u0.y, limit);
  r.h[2] = swiglu_bf16(g0.z, u0.z, limit);
  r.h[3] = swiglu_bf16(g0.w, u0.w, limit);
  r.h[4] = swiglu_bf16(g1.x, u1.x, limit);
  r.h[5] = swiglu_bf16(g1.y, u1.y, limit);
  r.h[6] = swiglu_bf16(g1.z, u1.z, limit);
  r.h[7] = swiglu_bf16(g1.w, u1.w, limit);
  return r.v;
}

} // namespace


#endif
