// ops.cu: the float32 operations of the DeepSeek-V4 forward pass on the GPU, with the
// semantics of the CPU backend (package kernels, ops.go): RMSNorm, interleaved RoPE, softmax,
// clamped SwiGLU, top-k, the sqrt-softplus router, embedding gather, a reference float32
// matmul and a float32 -> bf16 cast.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "dsv4cuda.h"
#include "swiglu.cuh"

namespace {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// block-wide sum for blockDim.x == 256
__device__ float block_sum(float v, float *sh) {
  v = warp_sum(v);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  float r = (threadIdx.x < (blockDim.x >> 5)) ? sh[threadIdx.x] : 0.f;
  if (w == 0) r = warp_sum(r);
  if (threadIdx.x == 0) sh[0] = r;
  __syncthreads();
  return sh[0];
}
__device__ float block_max(float v, float *sh) {
  v = warp_max(v);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  float r = (threadIdx.x < (blockDim.x >> 5)) ? sh[threadIdx.x] : -INFINITY;
  if (w == 0) r = warp_max(r);
  if (threadIdx.x == 0) sh[0] = r;
  __syncthreads();
  return sh[0];
}

__global__ void matmul_f32_kernel(float *y, const float *x, const float *w, int m, int n, int k) {
  __shared__ float xs[16][17], ws[16][17];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 16 + ty; // x row (m)
  int col = blockIdx.x * 16 + tx; // w row (n)
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    int kx = k0 + tx;
    xs[ty][tx] = (row < m && kx < k) ? x[(size_t)row * k + kx] : 0.f;
    int wr = blockIdx.x * 16 + ty;
    ws[ty][tx] = (wr < n && kx < k) ? w[(size_t)wr * k + kx] : 0.f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; i++) acc = fmaf(xs[ty][i], ws[tx][i], acc);
    __syncthreads();
  }
  if (row < m && col < n) y[(size_t)row * n + col] = acc;
}

__global__ void rmsnorm_kernel(float *y, __nv_bfloat16 *yb, const float *x, const float *w, int n,
                               float eps) {
  __shared__ float sh[32];
  const float *xr = x + (size_t)blockIdx.x * n;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
  ss = block_sum(ss, sh);
  float inv = rsqrtf(ss / (float)n + eps);
  float *yr = y ? y + (size_t)blockIdx.x * n : nullptr;
  __nv_bfloat16 *br = yb ? yb + (size_t)blockIdx.x * n : nullptr;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i] * inv;
    if (w) v = w[i] * v;
    if (yr) yr[i] = v;
    if (br) br[i] = __float2bfloat16_rn(v);
  }
}

__global__ void rope_kernel(float *x, const float *cs, const float *sn, int rows, int half,
                            float sign) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)rows * half) return;
  int r = (int)(i / half), p = (int)(i % half);
  float *xr = x + (size_t)r * 2 * half;
  float a = xr[2 * p], b = xr[2 * p + 1];
  float c = cs[i], s = sn[i] * sign;
  xr[2 * p] = a * c - b * s;
  xr[2 * p + 1] = b * c + a * s;
}

__global__ void softmax_kernel(float *x, int n) {
  __shared__ float sh[32];
  float *xr = x + (size_t)blockIdx.x * n;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, xr[i]);
  mx = block_max(mx, sh);
  if (mx == -INFINITY) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = 0.f;
    return;
  }
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float e = expf(xr[i] - mx);
    xr[i] = e;
    s += e;
  }
  s = block_sum(s, sh);
  float inv = 1.f / s;
  for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] *= inv;
}

__global__ void swiglu_kernel(float *out, __nv_bfloat16 *ob, const float *g, const float *u,
                              long long n, float limit) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = swiglu_f32(g[i], u[i], limit);
  if (out) out[i] = v;
  if (ob) ob[i] = __float2bfloat16_rn(v);
}

// ranks-before order of the CPU backend: larger first, ties by smaller index, NaN last.
__device__ __forceinline__ bool before(float a, int ia, float b, int ib) {
  bool an = a != a, bn = b != b;
  if (an && bn) return ia < ib;
  if (an) return false;
  if (bn) return true;
  if (a != b) return a > b;
  return ia < ib;
}

__device__ __forceinline__ void warp_best(float &v, int &i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (before(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
}

// one block (256 threads) per row; k rounds of a block-wide arg-best with exclusion.
__global__ void topk_kernel(int32_t *idx, const float *scores, int n, int k) {
  extern __shared__ float sv[]; // n scores
  __shared__ float bv[8];
  __shared__ int bi[8];
  const float *sr = scores + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sv[i] = sr[i];
  __shared__ unsigned char taken[4096];
  for (int i = threadIdx.x; i < n; i += blockDim.x) taken[i] = 0;
  __syncthreads();
  for (int r = 0; r < k; r++) {
    float v = 0.f;
    int ix = 0x7fffffff;
    bool have = false;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      if (taken[i]) continue;
      if (!have || before(sv[i], i, v, ix)) {
        v = sv[i];
        ix = i;
        have = true;
      }
    }
    if (!have) {
      v = NAN;
      ix = 0x7fffffff;
    }
    warp_best(v, ix);
    if ((threadIdx.x & 31) == 0) {
      bv[threadIdx.x >> 5] = v;
      bi[threadIdx.x >> 5] = ix;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      float v2 = threadIdx.x < 8 ? bv[threadIdx.x] : NAN;
      int i2 = threadIdx.x < 8 ? bi[threadIdx.x] : 0x7fffffff;
      warp_best(v2, i2);
      if (threadIdx.x == 0) {
        idx[(size_t)blockIdx.x * k + r] = i2;
        if (i2 >= 0 && i2 < n) taken[i2] = 1;
      }
    }
    __syncthreads();
  }
}

// one warp per row: s = sqrt(softplus(logit)); choose top-k of s + bias.
__global__ void router_kernel(int32_t *idx, float *wts, const float *logits, const float *bias,
                              int rows, int n, int k, float scale) {
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float *lr = logits + (size_t)row * n;
  float s[32], key[32]; // n <= 1024
#pragma unroll
  for (int j = 0; j < 32; j++) {
    int i = j * 32 + lane;
    float v = -INFINITY, kv = NAN;
    if (i < n) {
      float x = lr[i];
      float sp = x > 20.f ? x : log1pf(expf(x));
      v = sqrtf(sp);
      kv = v + (bias ? bias[i] : 0.f);
    }
    s[j] = v;
    key[j] = kv;
  }
  float sum = 0.f;
  unsigned tk = 0; // bit j: element j*32+lane already chosen
  float chosen_s[16];
  int chosen_i[16];
  for (int r = 0; r < k; r++) {
    float bvv = NAN;
    int bii = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < 32; j++) {
      int i = j * 32 + lane;
      if (i < n && !((tk >> j) & 1u) && before(key[j], i, bvv, bii)) {
        bvv = key[j];
        bii = i;
      }
    }
    warp_best(bvv, bii);
    float sv = 0.f;
#pragma unroll
    for (int j = 0; j < 32; j++) {
      if (j * 32 + lane == bii) {
        sv = s[j];
        tk |= 1u << j;
      }
    }
    sv = __shfl_sync(0xffffffffu, sv, bii & 31);
    chosen_s[r] = sv;
    chosen_i[r] = bii;
    sum += sv;
  }
  if (lane == 0) {
    float inv = scale / (sum + 1e-20f);
    for (int r = 0; r < k; r++) {
      idx[(size_t)row * k + r] = chosen_i[r];
      wts[(size_t)row * k + r] = chosen_s[r] * inv;
    }
  }
}

template <typename T> __device__ __forceinline__ float tof(T v);
template <> __device__ __forceinline__ float tof<float>(float v) { return v; }
template <> __device__ __forceinline__ float tof<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__global__ void embedding_kernel(float *y, const T *table, const int32_t *ids, int d, int vocab) {
  int m = blockIdx.y;
  int id = ids[m];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d; i += gridDim.x * blockDim.x) {
    float v = 0.f;
    if (id >= 0 && id < vocab) v = tof<T>(table[(size_t)id * d + i]);
    y[(size_t)m * d + i] = v;
  }
}

__global__ void f32_to_bf16_kernel(__nv_bfloat16 *d, const float *s, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = __float2bfloat16_rn(s[i]);
}

inline int last() { return (int)cudaGetLastError(); }

} // namespace

extern "C" {

int dsv4c_matmul_f32(float *y, const float *x, const float *w, int m, int n, int k, void *st) {
  if (m <= 0 || n <= 0 || k < 0) return DSV4C_ERR_SHAPE;
  dim3 b(16, 16), g((n + 15) / 16, (m + 15) / 16);
  matmul_f32_kernel<<<g, b, 0, (cudaStream_t)st>>>(y, x, w, m, n, k);
  return last();
}

int dsv4c_rmsnorm(float *y, void *yb, const float *x, const float *w, int rows, int n, float eps,
                  void *st) {
  if (rows <= 0 || n <= 0) return DSV4C_ERR_SHAPE;
  rmsnorm_kernel<<<rows, 256, 0, (cudaStream_t)st>>>(y, (__nv_bfloat16 *)yb, x, w, n, eps);
  return last();
}

int dsv4c_rope(float *x, const float *c, const float *s, int rows, int half, float sign,
               void *st) {
  if (rows <= 0 || half <= 0) return DSV4C_ERR_SHAPE;
  long long tot = (long long)rows * half;
  rope_kernel<<<(unsigned)((tot + 255) / 256), 256, 0, (cudaStream_t)st>>>(x, c, s, rows, half,
                                                                           sign);
  return last();
}

int dsv4c_softmax(float *x, int rows, int n, void *st) {
  if (rows <= 0 || n <= 0) return DSV4C_ERR_SHAPE;
  softmax_kernel<<<rows, 256, 0, (cudaStream_t)st>>>(x, n);
  return last();
}

int dsv4c_swiglu(float *out, void *ob, const float *g, const float *u, long long n, float limit,
                 void *st) {
  if (n <= 0) return DSV4C_ERR_SHAPE;
  swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)st>>>(
      out, (__nv_bfloat16 *)ob, g, u, n, limit);
  return last();
}

int dsv4c_topk(int32_t *idx, const float *scores, int rows, int n, int k, void *st) {
  if (rows <= 0 || n <= 0 || n > 4096 || k <= 0 || k > 64 || k > n) return DSV4C_ERR_SHAPE;
  topk_kernel<<<rows, 256, (size_t)n * sizeof(float), (cudaStream_t)st>>>(idx, scores, n, k);
  return last();
}

int dsv4c_router(int32_t *idx, float *wts, const float *logits, const float *bias, int rows,
                 int n, int k, float scale, void *st) {
  if (rows <= 0 || n <= 0 || n > 1024 || k <= 0 || k > 16 || k > n) return DSV4C_ERR_SHAPE;
  router_kernel<<<(rows + 3) / 4, 128, 0, (cudaStream_t)st>>>(idx, wts, logits, bias, rows, n,
                                                                k, scale);
  return last();
}

int dsv4c_embedding(float *y, const void *table, int is_bf16, const int32_t *ids, int m, int d,
                    int vocab, void *st) {
  if (m <= 0 || d <= 0 || vocab <= 0) return DSV4C_ERR_SHAPE;
  dim3 g((d + 255) / 256 > 64 ? 64 : (d + 255) / 256, m);
  if (is_bf16)
    embedding_kernel<__nv_bfloat16><<<g, 256, 0, (cudaStream_t)st>>>(
        y, (const __nv_bfloat16 *)table, ids, d, vocab);
  else
    embedding_kernel<float><<<g, 256, 0, (cudaStream_t)st>>>(y, (const float *)table, ids, d,
                                                             vocab);
  return last();
}

int dsv4c_f32_to_bf16(void *d, const float *s, long long n, void *st) {
  if (n <= 0) return DSV4C_ERR_SHAPE;
  f32_to_bf16_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)st>>>(
      (__nv_bfloat16 *)d, s, n);
  return last();
}

} // extern "C"
