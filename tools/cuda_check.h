// tools/cuda_check.h: the CK(call) macro of the standalone CUDA tools in tools/ (cuda_ceiling.cu,
// cuda_stream_trace.cu): a failed CUDA runtime call prints file, line, the call and the
// runtime's error string, and exits 1. Not part of the library (kernels/cuda reports errors as
// typed Go errors instead).
#ifndef DSV4GO_TOOLS_CUDA_CHECK_H
#define DSV4GO_TOOLS_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#endif
