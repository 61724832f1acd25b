// tools/cuda_clusters.cu: what thread-block clusters cost a chained decode launch on this GPU.
//
// A decode GEMV that splits K over a cluster of blocks (reducing the partial sums in
// distributed shared memory) needs every cluster resident at once to stay one wave, and each of
// its launches pays for the cluster barriers. This tool prints, for empty kernels of 256
// threads that take 16, 60 or 100 KB of dynamic shared memory (up to eight, three or two blocks
// per SM; the decode kernels take two), clusters of 1, 2, 4 and 8 blocks and grids of 128, 256
// and 264 blocks:
//   - cudaOccupancyMaxActiveClusters: how many such clusters the device holds at once (a grid
//     of more clusters runs in more than one wave);
//   - the time per launch of a CUDA graph of 200 back-to-back launches with the
//     programmatic-dependent-launch attribute (median of 5 replays / 200, as cudabench times
//     the GEMVs), each kernel doing griddepcontrol.wait only (barriers "none"), or also the barriers a
//     cluster reduction needs: arrive at the start, wait, one store into the next rank's shared
//     memory, cluster.sync ("cluster").
// Measured 2026-12-01 (BENCHMARKS.md, "This round (session 21)").
//
// Build here:  make cuda-bins (out/cuda/clusters)
// Run there:   out/cuda/clusters
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

namespace {

template <bool SYNC> __global__ void __launch_bounds__(256, 2) cluster_kernel(float *y) {
  extern __shared__ float s[];
  if (SYNC) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!SYNC) return;
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  namespace cg = cooperative_groups;
  cg::cluster_group c = cg::this_cluster();
  float *d = c.map_shared_rank(s, (c.block_rank() + 1) % c.num_blocks());
  d[threadIdx.x] = (float)threadIdx.x;
  c.sync();
  if (threadIdx.x == 0 && s[5] == 123.f) y[blockIdx.x] = 1; // never true: keeps the store live
}

int check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e != cudaSuccess;
}

} // namespace

int main() {
  float *y = nullptr;
  cudaStream_t st;
  if (check(cudaMalloc(&y, 1 << 20), "cudaMalloc") || check(cudaStreamCreate(&st), "stream")) return 1;
  printf("| dynamic smem | barriers | cluster | grid | max active clusters | us per chained launch |\n|---|---|---|---|---|---|\n");
  for (int smem : {16 * 1024, 60 * 1024, 100 * 1024}) {
    for (void *f : {(void *)cluster_kernel<false>, (void *)cluster_kernel<true>}) {
      cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
    for (int sync = 0; sync < 2; sync++)
      for (int cl : {1, 2, 4, 8})
        for (int grid : {128, 256, 264}) {
          if (grid % cl != 0 || (sync && cl == 1)) continue;
          cudaLaunchConfig_t cfg = {};
          cudaLaunchAttribute at[2];
          cfg.gridDim = dim3(grid);
          cfg.blockDim = dim3(256);
          cfg.dynamicSmemBytes = smem;
          cfg.stream = st;
          at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          at[0].val.programmaticStreamSerializationAllowed = 1;
          at[1].id = cudaLaunchAttributeClusterDimension;
          at[1].val.clusterDim.x = cl;
          at[1].val.clusterDim.y = 1;
          at[1].val.clusterDim.z = 1;
          cfg.attrs = at;
          cfg.numAttrs = 2;
          void *f = sync ? (void *)cluster_kernel<true> : (void *)cluster_kernel<false>;
          int ncl = -1;
          if (check(cudaOccupancyMaxActiveClusters(&ncl, f, &cfg), "cudaOccupancyMaxActiveClusters")) return 1;
          constexpr int R = 200;
          cudaGraph_t g;
          cudaGraphExec_t ge;
          check(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), "capture");
          for (int i = 0; i < R; i++) {
            cudaError_t e = sync ? cudaLaunchKernelEx(&cfg, cluster_kernel<true>, y) : cudaLaunchKernelEx(&cfg, cluster_kernel<false>, y);
            if (check(e, "launch")) return 1;
          }
          if (check(cudaStreamEndCapture(st, &g), "end capture") || check(cudaGraphInstantiate(&ge, g, 0), "instantiate")) return 1;
          cudaEvent_t a, b;
          cudaEventCreate(&a);
          cudaEventCreate(&b);
          std::vector<float> ts;
          for (int r = 0; r < 6; r++) { // the first replay warms up
            cudaEventRecord(a, st);
            cudaGraphLaunch(ge, st);
            cudaEventRecord(b, st);
            if (check(cudaEventSynchronize(b), "replay")) return 1;
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            if (r > 0) ts.push_back(ms * 1000 / R);
          }
          std::sort(ts.begin(), ts.end());
          printf("| %d KB | %s | %d | %d | %d | %.3f |\n", smem / 1024, sync ? "cluster" : "none", cl, grid, ncl, ts[ts.size() / 2]);
          cudaEventDestroy(a);
          cudaEventDestroy(b);
          cudaGraphExecDestroy(ge);
          cudaGraphDestroy(g);
        }
  }
  return check(cudaGetLastError(), "last error");
}
