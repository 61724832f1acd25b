// runtime.cu: thin C wrappers over the CUDA runtime (device, stream-ordered memory pool,
// streams, events, graph capture and replay) for the Go side. Each returns cudaError_t.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "dsv4cuda.h"

// ret returns e and, on failure, clears the runtime's last-error slot so that a later
// kernel launch's cudaGetLastError does not report this (non-sticky) failure again.
static int ret(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
  return (int)e;
}

extern "C" {

int dsv4c_device_count(int *n) { return (int)cudaGetDeviceCount(n); }

int dsv4c_set_device(int ordinal) { return (int)cudaSetDevice(ordinal); }

int dsv4c_device_props(int ordinal, char *name, int name_len, int *major, int *minor, int *sms,
                       size_t *total_mem, int *l2_bytes) {
  cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, ordinal);
  if (e != cudaSuccess) return (int)e;
  if (name && name_len > 0) {
    strncpy(name, p.name, (size_t)name_len - 1);
    name[name_len - 1] = 0;
  }
  *major = p.major;
  *minor = p.minor;
  *sms = p.multiProcessorCount;
  *total_mem = p.totalGlobalMem;
  *l2_bytes = p.l2CacheSize;
  return 0;
}

const char *dsv4c_error_name(int code) {
  if (code == DSV4C_ERR_SHAPE) return "DSV4C_ERR_SHAPE";
  if (code == DSV4C_ERR_FORMAT) return "DSV4C_ERR_FORMAT";
  return cudaGetErrorName((cudaError_t)code);
}

const char *dsv4c_error_string(int code) {
  if (code == DSV4C_ERR_SHAPE) return "shape not supported by the kernel";
  if (code == DSV4C_ERR_FORMAT) return "unknown weight format";
  return cudaGetErrorString((cudaError_t)code);
}

int dsv4c_pool_init(int ordinal) {
  cudaMemPool_t pool;
  cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, ordinal);
  if (e != cudaSuccess) return (int)e;
  uint64_t thr = UINT64_MAX; // keep freed blocks for reuse instead of returning them
  return (int)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
}

int dsv4c_malloc(void **d_p, size_t n, void *stream) {
  return ret(cudaMallocAsync(d_p, n, (cudaStream_t)stream));
}

int dsv4c_free(void *d_p, void *stream) { return (int)cudaFreeAsync(d_p, (cudaStream_t)stream); }

int dsv4c_htod(void *d_dst, const void *h_src, size_t n, void *stream) {
  cudaError_t e = cudaMemcpyAsync(d_dst, h_src, n, cudaMemcpyHostToDevice, (cudaStream_t)stream);
  if (e != cudaSuccess) return ret(e);
  return ret(cudaStreamSynchronize((cudaStream_t)stream));
}

int dsv4c_dtoh(void *h_dst, const void *d_src, size_t n, void *stream) {
  cudaError_t e = cudaMemcpyAsync(h_dst, d_src, n, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
  if (e != cudaSuccess) return ret(e);
  return ret(cudaStreamSynchronize((cudaStream_t)stream));
}

int dsv4c_dtod(void *d_dst, const void *d_src, size_t n, void *stream) {
  return (int)cudaMemcpyAsync(d_dst, d_src, n, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
}

int dsv4c_memset(void *d_dst, int value, size_t n, void *stream) {
  return (int)cudaMemsetAsync(d_dst, value, n, (cudaStream_t)stream);
}

int dsv4c_stream_create(void **stream) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = (void *)s;
  return (int)e;
}

int dsv4c_stream_destroy(void *stream) { return (int)cudaStreamDestroy((cudaStream_t)stream); }

int dsv4c_stream_sync(void *stream) { return ret(cudaStreamSynchronize((cudaStream_t)stream)); }

int dsv4c_event_create(void **ev) {
  cudaEvent_t e;
  cudaError_t r = cudaEventCreate(&e);
  *ev = (void *)e;
  return (int)r;
}

int dsv4c_event_destroy(void *ev) { return (int)cudaEventDestroy((cudaEvent_t)ev); }

int dsv4c_event_record(void *ev, void *stream) {
  return (int)cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream);
}

int dsv4c_event_sync(void *ev) { return (int)cudaEventSynchronize((cudaEvent_t)ev); }

int dsv4c_event_elapsed(float *ms, void *start, void *stop) {
  return (int)cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop);
}

int dsv4c_capture_begin(void *stream) {
  return (int)cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
}

int dsv4c_capture_end(void *stream, void **exec) {
  cudaGraph_t g;
  cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &g);
  if (e != cudaSuccess) return (int)e;
  cudaGraphExec_t x;
  e = cudaGraphInstantiate(&x, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) return (int)e;
  *exec = (void *)x;
  return 0;
}

int dsv4c_graph_destroy(void *exec) { return (int)cudaGraphExecDestroy((cudaGraphExec_t)exec); }

int dsv4c_graph_launch(void *exec, void *stream, int n, int sync) {
  for (int i = 0; i < n; i++) {
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
    if (e != cudaSuccess) return (int)e;
  }
  if (sync) return (int)cudaStreamSynchronize((cudaStream_t)stream);
  return 0;
}

} // extern "C"
