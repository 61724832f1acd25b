// tools/cuda_xlat.cu: how long a small L2-resident load (a decode GEMV's x) takes when the SM
// has weight loads in flight ahead of it, by the engine that issues those weight loads.
//
// The streaming decode GEMV (kernels/cuda/csrc/qgemv_stream.cu) issues its first weight units
// before griddepcontrol.wait and reads x right after it; x's loads complete only after the
// weight loads issued before them, so it issues only 2 units first (BENCHMARKS.md, "What limits
// decode"). This tool asks whether that queueing is in the SM's load/store path (cp.async, one
// 16-byte request per lane) or further down (L2, crossbar): every warp of a one-wave grid (two
// blocks of 8 warps per SM, as the GEMV) issues P units of 1,152 bytes (an NVFP4 unit: 1 KB of
// E2M1 + 128 B of scales) from cold HBM, then the block loads 4 KB of x (L2-resident) and
// stages it in shared memory. Per block it records when x was staged and when the weights
// landed, from the block's start (globaltimer, ns).
// Modes: 0 = weights by cp.async (16 bytes per lane, as the GEMV); 1 = weights by the TMA
// engine (cp.async.bulk, two bulk copies per unit completing on a per-slot mbarrier);
// 2 = x first, then the weights by cp.async (x's latency with nothing ahead of it); 3 = the
// blocks on even-numbered SMs issue 2P units per warp by cp.async and those on odd SMs none
// (the same bytes as mode 0): is x queued behind its own SM's loads or behind every SM's?
// Answer on the H200 (BENCHMARKS.md, "This round (session 18)"): behind its own SM's, whichever
// engine issued them; only x first gets it through.
//
// Build here:  make cuda-tools (out/cuda/xlat)
// Run there:   out/cuda/xlat (tools/cuda_bench_run.sh runs it)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"

constexpr int DEPTH = 8, RING = 16, UNIT = 1152, WB = 1024, SB = 128;

__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

template <int MODE>
__global__ void __launch_bounds__(256, 2)
    xlat_kernel(const uint4 *__restrict__ w, const uint4 *__restrict__ s, const uint4 *x, int P, size_t wblock,
                unsigned long long *out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) unsigned long long bar[8][DEPTH]; // mode 1: P <= DEPTH units per warp
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t *ring = smem + warp * DEPTH * UNIT;
  uint4 *xs = reinterpret_cast<uint4 *>(smem + 8 * DEPTH * UNIT);
  // this warp's units: contiguous 1 KB pieces of w, 128 B pieces of s
  const uint4 *wb = w + (size_t)blockIdx.x * wblock + (size_t)warp * RING * (WB / 16);
  const uint4 *sb = s + ((size_t)blockIdx.x * 8 + warp) * RING * (SB / 16);
  if (MODE == 1 && lane < DEPTH) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar[warp][lane])));
  }
  if (MODE == 1) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  const unsigned long long t0 = gtime();
  if (MODE == 3) P = smid & 1 ? 0 : 2 * P;
  auto xload = [&]() {
    const uint4 v = __ldcg(x + threadIdx.x);
    xs[threadIdx.x] = v;
  };
  if (MODE == 2) xload();
  for (int u = 0; u < P; u++) {
    uint8_t *d = ring + (u % DEPTH) * UNIT; // mode 3 reuses slots: only the traffic matters
    const uint4 *wu = wb + u * (WB / 16);
    const uint4 *su = sb + u * (SB / 16);
    if (MODE == 1) {
      if (lane == 0) {
        const unsigned mb = smem_u32(&bar[warp][u]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mb), "r"(UNIT) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_u32(d)),
                     "l"(wu), "r"(WB), "r"(mb)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_u32(d + WB)),
                     "l"(su), "r"(SB), "r"(mb)
                     : "memory");
      }
    } else {
      for (int i = 0; i < 2; i++) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(d + (i * 32 + lane) * 16)),
                     "l"(wu + i * 32 + lane)
                     : "memory");
      }
      if (lane < 8)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(d + WB + lane * 16)), "l"(su + lane)
                     : "memory");
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
  }
  if (MODE != 2) xload();
  __syncthreads();
  const unsigned long long t1 = gtime();
  if (MODE == 1) {
    for (int u = 0; u < P; u++) {
      const unsigned mb = smem_u32(&bar[warp][u]);
      unsigned ok = 0;
      while (!ok)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                     : "=r"(ok)
                     : "r"(mb)
                     : "memory");
    }
  } else {
    asm volatile("cp.async.wait_group 0;" ::: "memory");
  }
  __syncthreads();
  const unsigned long long t2 = gtime();
  // keep the data live
  unsigned acc = 0;
  for (int i = threadIdx.x; i < 8 * DEPTH * UNIT / 4; i += 256) acc ^= reinterpret_cast<unsigned *>(smem)[i];
  acc ^= reinterpret_cast<unsigned *>(xs)[threadIdx.x];
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = t1 - t0;
    out[blockIdx.x * 3 + 1] = t2 - t0;
    out[blockIdx.x * 3 + 2] = acc == 0x9e3779b9u ? 1 : smid;
  }
}

// read_all reads n uint4 (evicts earlier data from L2 without leaving dirty lines behind)
__global__ void read_all(const uint4 *p, size_t n, unsigned *sink) {
  unsigned a = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (a == 0x9e3779b9u) *sink = a;
}

__global__ void fill(uint4 *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    p[i] = make_uint4(h, h * 3 + 1, h * 5 + 7, h ^ 0x5bd1e995u);
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = 2 * sms;
  const size_t wblock = (size_t)8 * RING * (WB / 16); // uint4 per block
  const int copies = 16;                               // rotate: > 240 MB of weights in all
  const size_t wn = wblock * grid * copies, sn = (size_t)grid * 8 * RING * (SB / 16) * copies;
  uint4 *w, *s, *x;
  unsigned long long *out;
  CK(cudaMalloc(&w, wn * 16));
  CK(cudaMalloc(&s, sn * 16));
  CK(cudaMalloc(&x, 4096));
  CK(cudaMalloc(&out, (size_t)grid * 3 * 8));
  fill<<<1024, 256>>>(w, wn, 1);
  fill<<<1024, 256>>>(s, sn, 2);
  fill<<<1, 256>>>(x, 256, 3);
  // a 512 MB buffer read between launches evicts the weights from L2 (x is rewritten after it)
  uint4 *flush;
  const size_t fn = (size_t)512 << 20 >> 4;
  CK(cudaMalloc(&flush, fn * 16));
  fill<<<1024, 256>>>(flush, fn, 9);
  CK(cudaDeviceSynchronize());
  const size_t smem = (size_t)8 * DEPTH * UNIT + 4096;
  auto k0 = xlat_kernel<0>, k1 = xlat_kernel<1>, k2 = xlat_kernel<2>, k3 = xlat_kernel<3>;
  for (auto k : {k0, k1, k2, k3}) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  std::vector<unsigned long long> h((size_t)grid * 3);
  printf("x = 4 KB per block from L2 after P weight units (1,152 B) per warp from HBM; %d blocks of 8 warps (2 per SM)\n", grid);
  printf("mode 0: weights by cp.async; 1: by cp.async.bulk (TMA); 2: x first, then cp.async weights; 3: 2P units on even SMs, none on odd\n");
  printf("%-5s %-3s %10s %10s %10s | %10s %10s %10s   (us from the block's start; median over 8 launches of the per-launch median / p90 / max over blocks)\n",
         "mode", "P", "x p50", "x p90", "x max", "w p50", "w p90", "w max");
  for (int mode = 0; mode < 4; mode++)
    for (int P : {0, 1, 2, 4, 6, 8}) {
      if (mode == 2 && P != 0 && P != 2 && P != 8) continue;
      if (mode == 3 && P != 1 && P != 2 && P != 4) continue;
      std::vector<double> st[3][6]; // blocks: all, on even SMs, on odd SMs
      for (int rep = 0; rep < 8; rep++) {
        read_all<<<1024, 256>>>(flush, fn, reinterpret_cast<unsigned *>(out));
        fill<<<1, 256>>>(x, 256, rep + 7); // x was just written: L2-resident, as a GEMV's input
        const int c = rep % copies;
        const uint4 *wc = w + (size_t)c * wblock * grid, *sc = s + (size_t)c * grid * 8 * RING * (SB / 16);
        if (mode == 0) k0<<<grid, 256, smem>>>(wc, sc, x, P, wblock, out);
        if (mode == 1) k1<<<grid, 256, smem>>>(wc, sc, x, P, wblock, out);
        if (mode == 2) k2<<<grid, 256, smem>>>(wc, sc, x, P, wblock, out);
        if (mode == 3) k3<<<grid, 256, smem>>>(wc, sc, x, P, wblock, out);
        CK(cudaGetLastError());
        CK(cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost));
        for (int sel = 0; sel < 3; sel++) {
          std::vector<double> xv, wv;
          for (int b = 0; b < grid; b++) {
            if (sel > 0 && (int)(h[b * 3 + 2] & 1) != sel - 1) continue;
            xv.push_back(h[b * 3] / 1e3);
            wv.push_back(h[b * 3 + 1] / 1e3);
          }
          if (xv.empty()) continue;
          st[sel][0].push_back(pct(xv, 0.5));
          st[sel][1].push_back(pct(xv, 0.9));
          st[sel][2].push_back(pct(xv, 1));
          st[sel][3].push_back(pct(wv, 0.5));
          st[sel][4].push_back(pct(wv, 0.9));
          st[sel][5].push_back(pct(wv, 1));
        }
      }
      for (int sel = 0; sel < 3; sel++) {
        if ((mode == 3) != (sel > 0) || st[sel][0].empty()) continue;
        double m[6];
        for (int i = 0; i < 6; i++) m[i] = pct(st[sel][i], 0.5);
        const char *tag = sel == 0 ? "" : sel == 1 ? " even SMs (2P units)" : " odd SMs (none)";
        printf("%-5d %-3d %10.3f %10.3f %10.3f | %10.3f %10.3f %10.3f%s\n", mode, P, m[0], m[1], m[2], m[3], m[4], m[5], tag);
      }
    }
  return 0;
}
