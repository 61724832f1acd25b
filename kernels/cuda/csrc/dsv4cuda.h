/*
 * dsv4cuda.h: the only ABI between Go (package kernels/cuda, cgo) and the CUDA code in
 * this directory. Every function returns a cudaError_t value as int (0 = success) unless
 * stated otherwise; nothing here panics or aborts. Pointers named d_* are device pointers;
 * h_* are host pointers that are not retained after the call returns. Streams, events and
 * graphs are opaque handles (cudaStream_t, cudaEvent_t, cudaGraphExec_t).
 *
 * Quantized weights are in the tile layout written by the Go function PackNVFP4 /
 * PackMXFP4 / PackFP8Block (kernels/cuda/pack.go); see the comments there.
 */
#ifndef DSV4CUDA_H
#define DSV4CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes that are not CUDA's own. */
#define DSV4C_ERR_SHAPE 100001 /* a shape argument the kernels do not support */
#define DSV4C_ERR_FORMAT 100002 /* unknown weight format */

/* Weight formats for dsv4c_qgemm. */
#define DSV4C_FMT_NVFP4 1 /* E2M1 + E4M3 per 16 + F32 global */
#define DSV4C_FMT_MXFP4 2 /* E2M1 + UE8M0 per 32 */
#define DSV4C_FMT_FP8B 3  /* E4M3 + UE8M0 per 128x128 block */

/* ---- runtime ---- */
int dsv4c_device_count(int *n);
int dsv4c_set_device(int ordinal);
int dsv4c_device_props(int ordinal, char *name, int name_len, int *major, int *minor,
                       int *sms, size_t *total_mem, int *l2_bytes);
const char *dsv4c_error_name(int code);
const char *dsv4c_error_string(int code);
int dsv4c_pool_init(int ordinal); /* keep freed memory in the device's default pool */
int dsv4c_malloc(void **d_p, size_t n, void *stream);
int dsv4c_free(void *d_p, void *stream);
int dsv4c_htod(void *d_dst, const void *h_src, size_t n, void *stream); /* synchronous */
int dsv4c_dtoh(void *h_dst, const void *d_src, size_t n, void *stream); /* synchronous */
int dsv4c_dtod(void *d_dst, const void *d_src, size_t n, void *stream); /* async */
int dsv4c_memset(void *d_dst, int value, size_t n, void *stream);       /* async */
int dsv4c_stream_create(void **stream);
int dsv4c_stream_destroy(void *stream);
int dsv4c_stream_sync(void *stream);
int dsv4c_event_create(void **ev);
int dsv4c_event_destroy(void *ev);
int dsv4c_event_record(void *ev, void *stream);
int dsv4c_event_sync(void *ev);
int dsv4c_event_elapsed(float *ms, void *start, void *stop);
int dsv4c_capture_begin(void *stream);
int dsv4c_capture_end(void *stream, void **exec);
int dsv4c_graph_destroy(void *exec);
/* Launch exec n times on stream; if sync != 0, wait for the stream. One cgo crossing. */
int dsv4c_graph_launch(void *exec, void *stream, int n, int sync);

/* ---- quantized GEMM ----
 * y[M][N] (float32, row stride ldy) = alpha * x[M][K] (bf16, row stride ldx) . W[N][K]^T,
 * or y += ... when accumulate != 0. W is the packed tile layout of the format; N is padded
 * to npad (a multiple of 64) in the packing. K must be a multiple of 128.
 * For M <= 64 decode-shaped problems the work is split over K; y is zeroed first with
 * cudaMemsetAsync when accumulate == 0. Returns DSV4C_ERR_SHAPE for unsupported shapes.
 */
int dsv4c_qgemm(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                float alpha, const void *d_x, int ldx, float *d_y, int ldy, int M,
                int accumulate, void *stream);
/* Same, with a forced split-K factor (for the benchmark's sweeps); 0 = auto; -1 forces the
 * large-M pipelined kernel for M > 16 (tests). */
int dsv4c_qgemm_cfg(int fmt, const void *d_w, const void *d_scales, int N, int npad, int K,
                    float alpha, const void *d_x, int ldx, float *d_y, int ldy, int M,
                    int accumulate, int splits, void *stream);

/* Grouped decode GEMM for MoE: for each group z < G, y[z][M][N] = alpha * alphas[e] *
 * x[z][M][K] . W_e^T with e = ids[z] (device int32 [G]; NULL: e = z) and W_e the e-th of
 * weights stacked every wstride bytes (scales every sstride bytes); alphas (device float
 * [E]) may be NULL. x is bf16 [G][M][K], y float32 [G][M][N], both contiguous. M <= 16.
 * One launch for all groups; graph-capturable (ids and alphas are read on the device).
 * A group whose id is outside [0, E) is skipped (its y is zero when split-K zeroes y,
 * otherwise left unwritten). accumulate: 0 or 1 (y +=), or'ed with DSV4C_IDS_READY, the
 * caller's promise that d_ids was completely written, and its writes visible, before the
 * previous launch on stream began: true when at least one launch made without programmatic
 * dependent launch (any op of this library other than dsv4c_qgemm*, e.g. RMSNorm or SwiGLU)
 * sits between the kernel that wrote d_ids and this launch, or when d_ids was written by a
 * synchronous copy. The streaming kernel's balanced layout then reads the ids and d_alphas and
 * issues weight loads before waiting for the previous kernel, as it does for one matrix
 * (dsv4c_gemv_path DSV4C_GEMV_STREAM_READY); other kernels ignore the flag. A broken promise
 * reads stale ids: wrong experts or skipped groups, never memory outside the stack. d_alphas,
 * like the weights, must not be written by the previous kernel. */
#define DSV4C_IDS_READY 2
int dsv4c_qgemm_grouped(int fmt, const void *d_w, const void *d_scales, long long wstride,
                        long long sstride, int N, int npad, int K, float alpha,
                        const float *d_alphas, const int32_t *d_ids, const void *d_x,
                        float *d_y, int M, int G, int E, int accumulate, void *stream);

/* dsv4c_qgemm_grouped whose x is the clamped SwiGLU of float32 rows, made as the launch stages
 * x: d_gu is float32 [2][G][M][K], group z's gate rows at [0][z] and up rows at [1][z] (a w1 / w3
 * grouped launch whose ids list every w1 and then every w3 writes this layout), and group z's x
 * is bf16(silu(min(g, limit)) * clamp(u, -limit, limit)) (limit <= 0: no clamp), the math of
 * dsv4c_swiglu. No launch then sits between the w1 / w3 launch and this one (in a decode step:
 * the routed w2 follows w1 / w3 directly). G >= 2, limit not NaN, d_gu 16-byte aligned. Where
 * the streaming kernel declines (or is switched off), dsv4c_swiglu into stream-ordered scratch
 * (under capture: graph allocation and free nodes), then dsv4c_qgemm_grouped. accumulate as
 * for dsv4c_qgemm_grouped (0 / 1, or'ed with DSV4C_IDS_READY). */
int dsv4c_qgemm_grouped_swiglu(int fmt, const void *d_w, const void *d_scales, long long wstride,
                               long long sstride, int N, int npad, int K, float alpha,
                               const float *d_alphas, const int32_t *d_ids, const float *d_gu,
                               float *d_y, int M, int G, int E, int accumulate, float limit,
                               void *stream);

/* A decode step's routed MoE experts: for slot z < G with e = ids[z] (device int32 [G]; NULL:
 * e = z, G <= E), gate[z] = x[z] . W1_e^T and up[z] = x[z] . W3_e^T, h[z] = bf16(silu(min(gate, limit)) *
 * clamp(up, -limit, limit)) (the math of dsv4c_swiglu), y[z] = h[z] . W2_e^T (y += when
 * accumulate & 1): the results of dsv4c_qgemm_grouped on W1 and on W3, dsv4c_swiglu, then
 * dsv4c_qgemm_grouped on W2. x is bf16 [G][M][H], y float32 [G][M][H], M <= 16, G >= 2; d_gu
 * (float32 [2][G][M][I]) and d_h (bf16 [G][M][I]) are scratch. The w1 / w3 stack holds 2E
 * matrices [I][H] every wstride13 bytes (expert e's w1 at e, its w3 at E + e; per-matrix alphas
 * d_al13 [2E] or NULL), the w2 stack E matrices [H][I] (d_al2 [E] or NULL), one format, H and I
 * multiples of 128. accumulate may carry DSV4C_IDS_READY (dsv4c_qgemm_grouped). Two to four
 * launches, in the first form the kernels take (dsv4c_moe_path). A slot whose id is outside
 * [0, E) is skipped (its y left unwritten by the streaming kernel). */
int dsv4c_moe(int fmt, const void *d_w13, const void *d_s13, long long wstride13,
              long long sstride13, const float *d_al13, const void *d_w2, const void *d_s2,
              long long wstride2, long long sstride2, const float *d_al2, int H, int I,
              int npad13, int npad2, int E, const int32_t *d_ids, const void *d_x, float *d_gu,
              void *d_h, float *d_y, int M, int G, int accumulate, float limit, void *stream);

/* The form the last dsv4c_moe took (a test hook): 1 = w1 / w3 as one launch whose blocks each
 * stream the same rows of both and make their SwiGLU, then w2; 2 = w1 / w3 as one launch, then
 * w2 staging the SwiGLU; 3 = w1 / w3 as one launch, a SwiGLU launch, w2; 4 = separate w1, w3,
 * SwiGLU and w2 launches. */
int dsv4c_moe_path(void);

/* The kernel family of the last decode GEMV launch (M <= 16) in this process, for tests that
 * must see which kernel a shape takes (the dispatch falls back without a signal): 0 = none yet,
 * DSV4C_GEMV_EARLIER = the earlier kernels of qgemm.cu, DSV4C_GEMV_STREAM(_CLUSTER) = the
 * streaming kernel (with a cluster split of K), DSV4C_GEMV_PREDEC(_CLUSTER) = the predecode
 * kernel; both in qgemv_stream.cu. Not synchronized with launches on other threads. */
#define DSV4C_GEMV_EARLIER 1
#define DSV4C_GEMV_STREAM 2
#define DSV4C_GEMV_STREAM_CLUSTER 3
#define DSV4C_GEMV_PREDEC 4
#define DSV4C_GEMV_PREDEC_CLUSTER 5
#define DSV4C_GEMV_STREAM_READY 6 /* streaming, grouped, ids read before the wait */
int dsv4c_gemv_path(void);

/* ---- float32 / small ops (all row-major, float32 unless stated) ---- */
/* y[m][n] = x[m][k] . w[n][k]^T in float32 (reference-grade, not tuned). */
int dsv4c_matmul_f32(float *d_y, const float *d_x, const float *d_w, int m, int n, int k,
                     void *stream);
/* y = w * x / sqrt(mean(x^2)+eps) per row; w may be NULL; y_bf16 (may be NULL) also gets a
 * bf16 copy for the next GEMM's input. */
int dsv4c_rmsnorm(float *d_y, void *d_y_bf16, const float *d_x, const float *d_w, int rows,
                  int n, float eps, void *stream);
/* interleaved RoPE in place on x[rows][2*half] with per-row cos/sin [rows][half]. */
int dsv4c_rope(float *d_x, const float *d_cos, const float *d_sin, int rows, int half,
               float sign, void *stream);
int dsv4c_softmax(float *d_x, int rows, int n, void *stream);
/* out = silu(min(g, limit)) * clamp(u, -limit, limit) for n elements; out_bf16 may be NULL. */
int dsv4c_swiglu(float *d_out, void *d_out_bf16, const float *d_g, const float *d_u,
                 long long n, float limit, void *stream);
/* indices of the k largest of each row of scores[rows][n], largest first, ties by index,
 * NaN last. n <= 4096, k <= 64. */
int dsv4c_topk(int32_t *d_idx, const float *d_scores, int rows, int n, int k, void *stream);
/* DeepSeek-V4 router: s = sqrt(softplus(logits)); pick top-k of s + bias (bias may be NULL);
 * weights = s_sel / (sum s_sel + 1e-20) * scale. n <= 1024, k <= 16. */
int dsv4c_router(int32_t *d_idx, float *d_weights, const float *d_logits, const float *d_bias,
                 int rows, int n, int k, float scale, void *stream);
/* y[m][d] = float32(table[ids[m]][d]) from a bf16 (is_bf16 != 0) or float32 table. Ids out
 * of [0, vocab) give a zero row (the Go side validates before launch). */
int dsv4c_embedding(float *d_y, const void *d_table, int is_bf16, const int32_t *d_ids, int m,
                    int d, int vocab, void *stream);
/* float32 -> bf16 (round to nearest even). */
int dsv4c_f32_to_bf16(void *d_dst, const float *d_src, long long n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
