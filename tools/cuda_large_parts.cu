// tools/cuda_large_parts.cu: where a large-M call's time goes, part by part. For each (format,
// shape, M) it times, as CUDA-graph replay of R chained calls over rotating weight copies
// (median of 5 replays, divided by R, like cudabench):
//   call                  dsv4c_qgemm_large as the library runs it (whatever tiles and x
//                         staging it picks: pre-pass, GEMM, split-K reduction);
//   xperm / xperm (PDL)   the x pre-pass alone (xperm_kernel; an ordinary launch as in the
//                         library, or with the programmatic-dependent-launch attribute);
//   gemm 64x128 (xp ready) the 64 x 128-tile GEMM alone on an x already in the tile image
//                         (XM 1: the library's kernel for wkv at M = 2048 until session 8,
//                         what that call cost without its pre-pass; since session 8 the call
//                         runs XM 3 (x in natural order) instead; for the other shapes the
//                         library runs 256 x 128 tiles, so there the row is only a comparison);
//   xperm + gemm 64x128   both, without the library's pool allocation and free nodes;
// Build (make cuda-bins): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
//   -Ikernels/cuda/csrc -Itools -o out/cuda/large_parts tools/cuda_large_parts.cu
// Usage on the GPU machine: large_parts (no arguments).
#include "qgemm_large.cu"

#include <algorithm>
#include <stdio.h>
#include <vector>

#include "cuda_check.h"      // tools/cuda_check.h
#include "cuda_large_bufs.h" // tools/cuda_large_bufs.h

static void parts(const char *name, int fmt, int N, int K, int M) {
  LargeBufs b(fmt, N, K, M);
  const int npad = b.npad, copies = b.copies;
  const int R = 40;
  std::vector<uint8_t *> &w = b.w, &s = b.s;
  __nv_bfloat16 *x = b.x;
  float *y = b.y;
  const int tb = (M + 127) / 128;
  const long long total = (long long)tb * (K / 64) * 1024;
  uint4 *xp;
  CK(cudaMalloc(&xp, (size_t)total * 16));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int sms = device_sms();
  auto xperm = [&](bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(256);
    cfg.gridDim = dim3((unsigned)std::min((total + 255) / 256, 4LL * sms));
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    if (pdl) {
      pdl_attr(at[0]);
      cfg.attrs = at;
      cfg.numAttrs = 1;
    }
    CK(cudaLaunchKernelEx(&cfg, xperm_kernel, (const uint32_t *)x, K / 2, M, K / 64, total, xp));
  };
  xperm(false);
  CK(cudaStreamSynchronize(st));
  const int ntiles = npad / 16;
  const int rb4 = (ntiles + 3) / 4;
  auto call = [&](int k) {
    int e = dsv4c_qgemm_large(fmt, w[k % copies], s[k % copies], N, npad, K, 1.f, x, K, y, N, M, 0, 0, st);
    if (e) { fprintf(stderr, "call: %d\n", e); exit(1); }
  };
  auto gemm_alt = [&](int k) {
    int e = 0;
    if (fmt == DSV4C_FMT_NVFP4)
      e = launch_ws<DSV4C_FMT_NVFP4, 1, 4, 128>(w[k % copies], s[k % copies], ntiles, N, K, 1.f, x, K, y, N, M, 0, rb4, 1, K / 128, (long long)rb4 * tb, xp, st);
    else if (fmt == DSV4C_FMT_MXFP4)
      e = launch_ws<DSV4C_FMT_MXFP4, 1, 4, 128>(w[k % copies], s[k % copies], ntiles, N, K, 1.f, x, K, y, N, M, 0, rb4, 1, K / 128, (long long)rb4 * tb, xp, st);
    else
      e = launch_ws<DSV4C_FMT_FP8B, 1, 4, 128>(w[k % copies], s[k % copies], ntiles, N, K, 1.f, x, K, y, N, M, 0, rb4, 1, K / 128, (long long)rb4 * tb, xp, st);
    if (e) { fprintf(stderr, "gemm: %d\n", e); exit(1); }
  };
  struct Row { const char *what; std::function<void(int)> f; };
  std::vector<Row> rows = {
      {"call", call},
      {"xperm", [&](int) { xperm(false); }},
      {"xperm (PDL)", [&](int) { xperm(true); }},
      {"gemm 64x128 (xp ready)", gemm_alt},
      {"xperm + gemm 64x128", [&](int k) { xperm(false); gemm_alt(k); }},
  };
  for (auto &r : rows) {
    cudaGraphExec_t ge = captured_graph(st, r.f, R);
    const float ms = median_replay_ms(ge, st);
    printf("%-10s fmt %d N %5d K %5d M %5d  %-24s %8.2f us\n", name, fmt, N, K, M, r.what, ms * 1e3 / R);
    CK(cudaGraphExecDestroy(ge));
  }
  fflush(stdout);
  cudaFree(xp);
  cudaStreamDestroy(st);
}

int main() {
  CK(cudaSetDevice(0));
  for (int f : {DSV4C_FMT_NVFP4, DSV4C_FMT_MXFP4, DSV4C_FMT_FP8B}) parts("wkv", f, 512, 4096, 2048);
  parts("w13", DSV4C_FMT_NVFP4, 2048, 4096, 2048);
  parts("wo_b", DSV4C_FMT_NVFP4, 4096, 8192, 2048);
  return 0;
}
