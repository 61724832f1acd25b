// tools/cuda_stream_trace.cu: where does a chained decode GEMV launch spend its time?
//
// Builds the streaming decode GEMV (kernels/cuda/csrc/qgemv_stream.cu) with its timeline
// probes on (DSV4_STREAM_TRACE): thread 0 of every block records %globaltimer at block start,
// after griddepcontrol.wait (3), after x is staged (4), after its weight stream (5), after the
// cluster barrier (6, cluster split-K only) and after its store (7). A CUDA graph of L
// back-to-back launches (rotating weight copies, as cudabench does; each launch writes its own
// y so that blocks can be told apart) is replayed and the per-launch medians printed:
//   period     first block start of launch k+1 - that of launch k
//   release    first wait release of launch k+1 - last block end of launch k
//   pre        block start -> wait release (the overlap with the previous launch)
//   x          wait release -> x staged; stream: x staged -> weights done; tail: -> end
// Usage (GPU machine): stream_trace [fmt 1=NVFP4 2=MXFP4 3=FP8B] [N K M] (default: the five
// V4-Flash shapes at M = 1, NVFP4). Env knobs of the kernel (DSV4GO_GEMV3_*) apply.
// Build: make cuda-bins (out/cuda/stream_trace).
#define DSV4_STREAM_TRACE 1
#include "qgemv_stream.cu"

#include <algorithm>
#include <stdio.h>
#include <vector>

#include "cuda_check.h"

static double med(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void trace_shape(int fmt, int N, int K, int M) {
  const int L = 160, copies = 48;
  const int npad = (N + 63) / 64 * 64;
  const size_t wbytes = fmt == DSV4C_FMT_FP8B ? (size_t)npad * K : (size_t)npad * K / 2;
  const size_t sbytes = fmt == DSV4C_FMT_NVFP4 ? (size_t)npad * K / 16 : fmt == DSV4C_FMT_MXFP4 ? (size_t)npad * K / 32 : (size_t)(npad / 128 + 1) * (K / 128);
  std::vector<uint8_t *> w(copies), s(copies);
  for (int c = 0; c < copies; c++) {
    CK(cudaMalloc(&w[c], wbytes));
    CK(cudaMalloc(&s[c], sbytes + 16));
    CK(cudaMemset(w[c], 0x35, wbytes));
    CK(cudaMemset(s[c], 0x30, sbytes + 16)); // finite scales
  }
  __nv_bfloat16 *x;
  float *y;
  CK(cudaMalloc(&x, (size_t)M * K * 2));
  CK(cudaMemset(x, 0x3c, (size_t)M * K * 2));
  CK(cudaMalloc(&y, (size_t)L * M * N * 4));
  const size_t slots = (size_t)L * 4096;
  unsigned long long *tr;
  CK(cudaMalloc(&tr, slots * 8 * 8));
  CK(cudaMemcpyToSymbol(g_trace, &tr, sizeof(tr)));
  const unsigned cap = (unsigned)slots;
  CK(cudaMemcpyToSymbol(g_trace_cap, &cap, sizeof(cap)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto launch = [&](int k) {
    int e = dsv4c_qgemv_stream(fmt, w[k % copies], s[k % copies], 0, 0, N, npad, K, 1.f, nullptr, nullptr, x,
                               y + (size_t)k * M * N, M, 1, 1, 0, 0.f, st);
    if (e) {
      fprintf(stderr, "launch: %d\n", e);
      exit(1);
    }
  };
  launch(0);
  CK(cudaStreamSynchronize(st));
  cudaGraphExec_t ge = captured_graph(st, launch, L);
  unsigned zero = 0;
  CK(cudaMemcpyToSymbol(g_trace_n, &zero, sizeof(zero)));
  CK(cudaMemset(tr, 0, slots * 64));
  const float ms = replay_ms(ge, st);
  unsigned n;
  CK(cudaMemcpyFromSymbol(&n, g_trace_n, sizeof(n)));
  if (n > cap) {
    fprintf(stderr, "trace: %u blocks, buffer holds %u: the last ones are lost\n", n, cap);
    n = cap;
  }
  std::vector<unsigned long long> h((size_t)n * 8);
  CK(cudaMemcpy(h.data(), tr, h.size() * 8, cudaMemcpyDeviceToHost));
  // per launch: min/max of each probe over its blocks (0 = not recorded)
  struct Lk {
    double s0 = 1e30, s1 = 0, w0 = 1e30, w1 = 0, e1 = 0;
    std::vector<double> pre, xs, stream, tail;
    int blocks = 0;
  };
  std::vector<Lk> lk(L);
  unsigned long long t0 = ~0ull;
  for (unsigned i = 0; i < n; i++) t0 = std::min(t0, h[i * 8 + 2]);
  for (unsigned i = 0; i < n; i++) {
    const unsigned long long *r = &h[i * 8];
    const long long k = ((long long)r[0] - (long long)(uintptr_t)y) / (4LL * M * N);
    if (k < 0 || k >= L) continue;
    Lk &q = lk[k];
    const double st0 = (double)(r[2] - t0), tw = r[3] ? (double)(r[3] - t0) : 0, tx = r[4] ? (double)(r[4] - t0) : 0,
                 ts = r[5] ? (double)(r[5] - t0) : 0;
    double te = 0;
    for (int j = 5; j <= 7; j++)
      if (r[j]) te = std::max(te, (double)(r[j] - t0));
    q.blocks++;
    q.s0 = std::min(q.s0, st0);
    q.s1 = std::max(q.s1, st0);
    if (tw) {
      q.w0 = std::min(q.w0, tw);
      q.w1 = std::max(q.w1, tw);
      q.pre.push_back(tw - st0);
    }
    if (tx && tw) q.xs.push_back(tx - tw);
    if (ts && tx) q.stream.push_back(ts - tx);
    if (te && ts) q.tail.push_back(te - ts);
    q.e1 = std::max(q.e1, te);
  }
  std::vector<double> period, release, spread, pre, xs, stream, tail, startspread, life;
  for (int k = L / 4; k < 3 * L / 4; k++) {
    period.push_back(lk[k + 1].s0 - lk[k].s0);
    release.push_back(lk[k + 1].w0 - lk[k].e1);
    spread.push_back(lk[k].w1 - lk[k].w0);
    startspread.push_back(lk[k].s1 - lk[k].s0);
    life.push_back(lk[k].e1 - lk[k].w0);
    pre.push_back(med(lk[k].pre));
    xs.push_back(med(lk[k].xs));
    stream.push_back(med(lk[k].stream));
    tail.push_back(med(lk[k].tail));
  }
  printf("| %d | %dx%d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", fmt, N, K, M,
         lk[L / 2].blocks, ms * 1e3 / L, med(period) / 1e3, med(release) / 1e3, med(startspread) / 1e3, med(spread) / 1e3,
         med(life) / 1e3, med(pre) / 1e3, med(xs) / 1e3, med(stream) / 1e3, med(tail) / 1e3);
  // one launch in the middle: percentiles over its blocks of each probe, relative to its first
  // wait release (what makes the last block late: a late start, a slow x, a slow stream?)
  {
    const int km = L / 2;
    std::vector<double> v[5];
    for (unsigned i = 0; i < n; i++) {
      const unsigned long long *r = &h[i * 8];
      const long long k = ((long long)r[0] - (long long)(uintptr_t)y) / (4LL * M * N);
      if (k != km || !r[3] || !r[4] || !r[5]) continue;
      double te = 0;
      for (int j = 5; j <= 7; j++)
        if (r[j]) te = std::max(te, (double)(r[j] - t0));
      const double base = lk[km].w0;
      v[0].push_back((double)(r[2] - t0) - base);
      v[1].push_back((double)(r[3] - t0) - base);
      v[2].push_back((double)(r[4] - t0) - base);
      v[3].push_back((double)(r[5] - t0) - base);
      v[4].push_back(te - base);
    }
    const char *names[5] = {"start", "wait", "x", "stream", "end"};
    printf("|   | launch %d, us from its first wait release: p10 / p50 / p90 / max |", km);
    for (int j = 0; j < 5; j++) {
      std::sort(v[j].begin(), v[j].end());
      const size_t c = v[j].size();
      if (!c) continue;
      printf(" %s %.2f/%.2f/%.2f/%.2f", names[j], v[j][c / 10] / 1e3, v[j][c / 2] / 1e3, v[j][c * 9 / 10] / 1e3, v[j][c - 1] / 1e3);
    }
    printf(" |\n");
  }
  for (int c = 0; c < copies; c++) {
    cudaFree(w[c]);
    cudaFree(s[c]);
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(tr);
  cudaGraphExecDestroy(ge);
  cudaStreamDestroy(st);
}

int main(int argc, char **argv) {
  CK(cudaSetDevice(0));
  printf("| fmt | NxK | M | blocks | us/launch (event) | period | release | start spread | wait spread | wait->last end | pre (start->wait) | x | stream | tail |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  if (argc >= 5) {
    trace_shape(atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    return 0;
  }
  const int shapes[5][2] = {{2048, 4096}, {4096, 2048}, {32768, 1024}, {4096, 8192}, {512, 4096}};
  for (auto &sh : shapes) trace_shape(argc >= 2 ? atoi(argv[1]) : DSV4C_FMT_NVFP4, sh[0], sh[1], 1);
  return 0;
}
