// tools/cuda_check.h: what the standalone CUDA tools in tools/ (cuda_ceiling.cu,
// cuda_stream_trace.cu, cuda_large_parts.cu, cuda_xlat.cu) share: the CK(call) macro (a failed CUDA runtime call prints file,
// line, the call and the runtime's error string, and exits 1), captured_graph,
// replay_ms, median_replay_ms, time_graph_us, launch_config, pct and copy_gbs. Not part of
// the library (kernels/cuda reports errors as typed Go errors instead).
#ifndef DSV4GO_TOOLS_CUDA_CHECK_H
#define DSV4GO_TOOLS_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <functional>
#include <vector>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

// captured_graph captures launch(0 .. R-1) on st into a CUDA graph, instantiates it, replays
// it once (warm-up, synchronized) and returns the executable graph (destroy it with
// cudaGraphExecDestroy).
static inline cudaGraphExec_t captured_graph(cudaStream_t st, const std::function<void(int)> &launch, int R) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int r = 0; r < R; r++) launch(r);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  return ge;
}

// replay_ms replays ge once on st and returns its time in milliseconds (CUDA events around
// the launch; synchronizes).
static inline float replay_ms(cudaGraphExec_t ge, cudaStream_t st) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, st));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(b, st));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms;
}

// median_replay_ms replays ge 5 times on st and returns the median time in milliseconds.
static inline float median_replay_ms(cudaGraphExec_t ge, cudaStream_t st) {
  float t[5];
  for (int i = 0; i < 5; i++) t[i] = replay_ms(ge, st);
  std::sort(t, t + 5);
  return t[2];
}

// time_graph_us captures launch(0 .. R-1) on st into a graph (captured_graph), replays it
// (median_replay_ms) and returns the microseconds per launch; the graph is destroyed.
static inline float time_graph_us(cudaStream_t st, const std::function<void(int)> &launch, int R) {
  cudaGraphExec_t ge = captured_graph(st, launch, R);
  const float us = median_replay_ms(ge, st) * 1000.f / R;
  CK(cudaGraphExecDestroy(ge));
  return us;
}

// launch_config: grid x threads on st, with the programmatic-dependent-launch attribute (at,
// owned by the caller) when pdl.
static inline cudaLaunchConfig_t launch_config(cudaStream_t st, int grid, int threads, bool pdl, cudaLaunchAttribute &at) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.stream = st;
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &at;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

// pct returns the p-quantile of v (the element at index p * size of the sorted values, the last
// for p = 1; 0 when empty).
static inline double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

// copy_gbs returns the device-to-device copy bandwidth in GB/s (read + write bytes) measured
// the way kernels/cuda/cmd/cudabench does: eager cudaMemcpyAsync of 1 GiB between two buffers
// on st, 2 warm-up copies, then the median of 3 timings of 10 copies. (A captured graph of
// copies between the halves of one buffer read 2,704 GB/s on 2026-12-01 against 4,243 this
// way, in the same device call; the GEMVs' % of copy is always against this figure.)
static inline double copy_gbs(cudaStream_t st) {
  const size_t n = (size_t)1 << 30;
  char *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemsetAsync(a, 0x5b, n, st));
  for (int i = 0; i < 2; i++) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> s;
  for (int rep = 0; rep < 3; rep++) {
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < 10; i++) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    s.push_back(ms * 1e-3);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * n * 10 / pct(s, 0.5) / 1e9;
}

#endif
