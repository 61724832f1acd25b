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
// V4-Flash shapes at M = 1, NVFP4). Env knobs of the kernel (DSV4GO_GEMV3_*) apply. SM_STATS=1
// adds, per shape, whether the SMs that finish a launch last are the same in every launch
// (sm_stats below).
// stream_trace moe [fmt [tokens]]: a routed MoE layer as Stream.MoE runs it in its first form
// (trace_moe below; MOE_ONLY=1 / 2 one of its two launches, MOE_DUMP=1 every block of one call).
// Build: make cuda-tools (out/cuda/stream_trace; make cuda-bins builds it too).
#define DSV4_STREAM_TRACE 1
#include "qgemv_stream.cu"

#include <algorithm>
#include <cmath>
#include <stdio.h>
#include <string>
#include <vector>

#include "cuda_check.h"

static double med(const std::vector<double> &v) { return pct(v, 0.5); }

// eager_then_graph runs launch(0) once on st (a failing launch exits before any capture), then
// returns captured_graph of launch(0 .. L-1).
static cudaGraphExec_t eager_then_graph(cudaStream_t st, const std::function<void(int)> &launch, int L) {
  launch(0);
  CK(cudaStreamSynchronize(st));
  return captured_graph(st, launch, L);
}

// trace_buffer allocates room for `slots` block records (8 words each) and points the kernel's
// probes at it.
static unsigned long long *trace_buffer(size_t slots) {
  unsigned long long *tr;
  CK(cudaMalloc(&tr, slots * 8 * 8));
  CK(cudaMemcpyToSymbol(g_trace, &tr, sizeof(tr)));
  const unsigned cap = (unsigned)slots;
  CK(cudaMemcpyToSymbol(g_trace_cap, &cap, sizeof(cap)));
  return tr;
}

// traced_replay clears the records, replays ge once on st (its time in *ms) and returns the
// records of the blocks it ran, 8 words each (trace_buffer), and in *t0 the first block start
// (a record never written stays zero and is not counted).
static std::vector<unsigned long long> traced_replay(cudaGraphExec_t ge, cudaStream_t st, unsigned long long *tr,
                                                     size_t slots, float *ms, unsigned long long *t0) {
  unsigned zero = 0; // cleared on st itself: a non-blocking stream is not ordered after the legacy one
  CK(cudaMemcpyToSymbolAsync(g_trace_n, &zero, sizeof(zero), 0, cudaMemcpyHostToDevice, st));
  CK(cudaMemsetAsync(tr, 0, slots * 64, st));
  CK(cudaStreamSynchronize(st));
  *ms = replay_ms(ge, st);
  unsigned n;
  CK(cudaMemcpyFromSymbol(&n, g_trace_n, sizeof(n)));
  if (n > slots) {
    fprintf(stderr, "trace: %u blocks, buffer holds %zu: the last ones are lost\n", n, slots);
    n = (unsigned)slots;
  }
  std::vector<unsigned long long> h((size_t)n * 8);
  CK(cudaMemcpy(h.data(), tr, h.size() * 8, cudaMemcpyDeviceToHost));
  *t0 = ~0ull;
  for (unsigned i = 0; i < n; i++)
    if (h[i * 8 + 2]) *t0 = std::min(*t0, h[i * 8 + 2]);
  return h;
}

// launch_of returns which launch of the graph a record belongs to: launch k writes (or is named
// by) y + k * per floats, and the record's word 0 holds the y its block was given.
static long long launch_of(const unsigned long long *r, const float *y, size_t per) {
  return ((long long)r[0] - (long long)(uintptr_t)y) / (4LL * (long long)per);
}

// sm_stats (SM_STATS=1, shape mode): is a launch's last block late because of its SM? For the
// launches of the middle half, each SM's finish (its last block's end, us from the launch's first
// wait release) and its stream (x staged -> weights done, its blocks' mean); per SM the mean
// over the even and over the odd launches, and Pearson's r between the two halves (near 1: the
// same SMs are slow in every launch; near 0: the slow ones change from launch to launch); the
// ten slowest SMs; how often the launch's last block sat on one of them.
template <typename Lk>
static void sm_stats(const std::vector<unsigned long long> &h, const std::vector<Lk> &lk, int L, const float *y,
                     size_t per, unsigned long long t0) {
  const int S = 1024;
  std::vector<double> fin[2], str[2];
  std::vector<int> nf[2], ns[2];
  for (int p = 0; p < 2; p++) {
    fin[p].assign(S, 0);
    str[p].assign(S, 0);
    nf[p].assign(S, 0);
    ns[p].assign(S, 0);
  }
  std::vector<std::vector<double>> finK(L, std::vector<double>(S, -1));
  const unsigned n = (unsigned)(h.size() / 8);
  for (unsigned i = 0; i < n; i++) {
    const unsigned long long *r = &h[i * 8];
    const long long k = launch_of(r, y, per);
    if (k < L / 4 || k >= 3 * L / 4 || !r[5]) continue;
    const int sm = (int)(r[1] >> 32) & (S - 1);
    double te = 0;
    for (int j = 5; j <= 7; j++)
      if (r[j]) te = std::max(te, (double)(r[j] - t0));
    finK[k][sm] = std::max(finK[k][sm], (te - lk[k].w0) / 1e3);
    if (r[4]) {
      str[k & 1][sm] += (double)(r[5] - r[4]) / 1e3;
      ns[k & 1][sm]++;
    }
  }
  int lastOnSlow = 0, launches = 0;
  for (int k = L / 4; k < 3 * L / 4; k++)
    for (int sm = 0; sm < S; sm++)
      if (finK[k][sm] >= 0) {
        fin[k & 1][sm] += finK[k][sm];
        nf[k & 1][sm]++;
      }
  std::vector<int> sms;
  for (int sm = 0; sm < S; sm++)
    if (nf[0][sm] && nf[1][sm] && ns[0][sm] && ns[1][sm]) {
      sms.push_back(sm);
      for (int p = 0; p < 2; p++) {
        fin[p][sm] /= nf[p][sm];
        str[p][sm] /= ns[p][sm];
      }
    }
  auto pearson = [&](const std::vector<double> &a, const std::vector<double> &b) {
    double ma = 0, mb = 0;
    for (int sm : sms) ma += a[sm], mb += b[sm];
    ma /= sms.size();
    mb /= sms.size();
    double sab = 0, saa = 0, sbb = 0;
    for (int sm : sms) sab += (a[sm] - ma) * (b[sm] - mb), saa += (a[sm] - ma) * (a[sm] - ma), sbb += (b[sm] - mb) * (b[sm] - mb);
    return sab / std::sqrt(saa * sbb + 1e-30);
  };
  std::vector<std::pair<double, int>> order;
  std::vector<double> all;
  for (int sm : sms) {
    order.push_back({(fin[0][sm] + fin[1][sm]) / 2, sm});
    all.push_back((fin[0][sm] + fin[1][sm]) / 2);
  }
  std::sort(order.rbegin(), order.rend());
  std::vector<bool> slow(S, false);
  for (int i = 0; i < 10 && i < (int)order.size(); i++) slow[order[i].second] = true;
  for (int k = L / 4; k < 3 * L / 4; k++) {
    int arg = -1;
    double best = -1;
    for (int sm = 0; sm < S; sm++)
      if (finK[k][sm] > best) best = finK[k][sm], arg = sm;
    if (arg >= 0) {
      launches++;
      lastOnSlow += slow[arg];
    }
  }
  printf("SM stats: %zu SMs; finish (us after the first wait release) p50 %.2f p90 %.2f max %.2f; r(even, odd launches): "
         "finish %.2f, stream %.2f; last block on the 10 slowest SMs in %d of %d launches\n",
         sms.size(), pct(all, 0.5), pct(all, 0.9), pct(all, 1), pearson(fin[0], fin[1]), pearson(str[0], str[1]), lastOnSlow,
         launches);
  printf("  slowest SMs (id: mean finish even / odd, mean stream even / odd):");
  for (int i = 0; i < 10 && i < (int)order.size(); i++) {
    const int sm = order[i].second;
    printf(" %d: %.2f/%.2f %.2f/%.2f;", sm, fin[0][sm], fin[1][sm], str[0][sm], str[1][sm]);
  }
  printf("\n");
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
  unsigned long long *tr = trace_buffer(slots);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto launch = [&](int k) {
    int e = dsv4c_qgemv_stream(fmt, w[k % copies], s[k % copies], 0, 0, N, npad, K, 1.f, nullptr, nullptr, x,
                               y + (size_t)k * M * N, M, 1, 1, 0, 0.f, nullptr, st);
    if (e) {
      fprintf(stderr, "launch: %d\n", e);
      exit(1);
    }
  };
  cudaGraphExec_t ge = eager_then_graph(st, launch, L);
  float ms;
  unsigned long long t0;
  const std::vector<unsigned long long> h = traced_replay(ge, st, tr, slots, &ms, &t0);
  const unsigned n = (unsigned)(h.size() / 8);
  // per launch: min/max of each probe over its blocks (0 = not recorded)
  struct Lk {
    double s0 = 1e30, s1 = 0, w0 = 1e30, w1 = 0, e1 = 0;
    std::vector<double> pre, xs, stream, tail;
    int blocks = 0;
  };
  std::vector<Lk> lk(L);
  for (unsigned i = 0; i < n; i++) {
    const unsigned long long *r = &h[i * 8];
    const long long k = launch_of(r, y, (size_t)M * N);
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
      if (launch_of(r, y, (size_t)M * N) != km || !r[3] || !r[4] || !r[5]) continue;
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
    for (int j = 0; j < 5; j++)
      if (!v[j].empty())
        printf(" %s %.2f/%.2f/%.2f/%.2f", names[j], pct(v[j], 0.1) / 1e3, pct(v[j], 0.5) / 1e3, pct(v[j], 0.9) / 1e3,
               pct(v[j], 1) / 1e3);
    printf(" |\n");
  }
  if (getenv("SM_STATS")) sm_stats(h, lk, L, y, (size_t)M * N, t0);
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

// One launch's probes, gathered over its blocks (times in ns from the trace's first start).
struct MoELaunch {
  double s0 = 1e30, s1 = 0, w0 = 1e30, w1 = 0, e1 = 0;
  std::vector<double> start, wait, xs, done, end;
  int blocks = 0;
};

// trace_moe traces the two launches of dsv4c_moe's form 1 (kernels/cuda/csrc/qgemm.cu) for
// `tokens` tokens routed top-6 to distinct experts of 256 (6 * tokens slots of one row): the
// w1 / w3 launch with DSV4C_W13_ROWS (each block its rows of w1 and w3, their SwiGLU to h),
// then w2 on h, ids declared ready, per-expert alphas (ones), L calls in one graph, each call's
// experts drawn afresh (seeded). It calls the streaming kernel's launcher directly, as form 1
// does (not through Stream.MoE's checks and form choice). Prints the medians over the middle
// calls, then one call's timeline.
static void trace_moe(int fmt, int tokens) {
  const int L = 96, E = 256, H = 4096, I = 2048, M = 1, G = 6 * tokens;
  if (fmt != DSV4C_FMT_NVFP4 && fmt != DSV4C_FMT_MXFP4) {
    fprintf(stderr, "moe: FP4 only (DSV4C_W13_ROWS): fmt 1 or 2\n");
    exit(1);
  }
  if (tokens < 1 || G > E) {
    fprintf(stderr, "moe: tokens in 1 .. %d (distinct experts of %d)\n", E / 6, E);
    exit(1);
  }
  const size_t w13b = (size_t)I * H / 2, s13b = (size_t)I * H / (fmt == DSV4C_FMT_NVFP4 ? 16 : 32);
  const size_t w2b = (size_t)H * I / 2, s2b = (size_t)H * I / (fmt == DSV4C_FMT_NVFP4 ? 16 : 32);
  uint8_t *w13, *s13, *w2, *s2;
  CK(cudaMalloc(&w13, 2 * E * w13b));
  CK(cudaMalloc(&s13, 2 * E * s13b));
  CK(cudaMalloc(&w2, E * w2b));
  CK(cudaMalloc(&s2, E * s2b));
  CK(cudaMemset(w13, 0x35, 2 * E * w13b));
  CK(cudaMemset(s13, 0x30, 2 * E * s13b));
  CK(cudaMemset(w2, 0x35, E * w2b));
  CK(cudaMemset(s2, 0x30, E * s2b));
  const int stride = (G + 3) / 4 * 4;
  std::vector<int> ids((size_t)L * stride, 0);
  unsigned long long rng = 7;
  for (int c = 0; c < L; c++) {
    std::vector<int> perm(E);
    for (int i = 0; i < E; i++) perm[i] = i;
    for (int i = 0; i < G; i++) { // partial Fisher-Yates
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const int j = i + (int)((rng >> 33) % (unsigned long long)(E - i));
      std::swap(perm[i], perm[j]);
      ids[(size_t)c * stride + i] = perm[i];
    }
  }
  int *dids;
  CK(cudaMalloc(&dids, ids.size() * 4));
  CK(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  __nv_bfloat16 *x, *hb;
  float *y;
  CK(cudaMalloc(&x, (size_t)G * M * H * 2));
  CK(cudaMemset(x, 0x3c, (size_t)G * M * H * 2));
  CK(cudaMalloc(&hb, (size_t)G * M * I * 2));
  CK(cudaMemset(hb, 0x3c, (size_t)G * M * I * 2)); // (MOE_ONLY=2 reads it unwritten)
  float *al; // per-expert alphas, as Stream.MoE passes them: w1 / w3 [2E], then w2 [E]
  CK(cudaMalloc(&al, 3 * E * sizeof(float)));
  {
    const std::vector<float> ones(3 * E, 1.f);
    CK(cudaMemcpy(al, ones.data(), 3 * E * sizeof(float), cudaMemcpyHostToDevice));
  }
  const size_t per = (size_t)G * M * H; // floats per launch: launch j of the graph writes (or is named by) y + j * per
  CK(cudaMalloc(&y, (size_t)2 * L * per * 4));
  const size_t slots = (size_t)2 * L * 2048;
  unsigned long long *tr = trace_buffer(slots);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  // MOE_ONLY=1 / 2: the w1 / w3 launches only / the w2 launches only (timing)
  const char *oe = getenv("MOE_ONLY");
  const int only = oe ? atoi(oe) : 0;
  if (only < 0 || only > 2) {
    fprintf(stderr, "moe: MOE_ONLY is 1 (w1 / w3 launches) or 2 (w2 launches)\n");
    exit(1);
  }
  auto launch = [&](int c) {
    const int *id = dids + (size_t)c * stride;
    // w1 / w3 rows: y is not written (the rows go to h); it names the launch in the trace
    int e = 0;
    if (only != 2)
      e = dsv4c_qgemv_stream(fmt, w13, s13, w13b, s13b, I, I, H, 1.f, al, id, x, y + (size_t)(2 * c) * per, M, G,
                             E, DSV4C_IDS_READY | DSV4C_W13_ROWS, 10.f, hb, st);
    if (!e && only != 1)
      e = dsv4c_qgemv_stream(fmt, w2, s2, w2b, s2b, H, H, I, 1.f, al + 2 * E, id, hb, y + (size_t)(2 * c + 1) * per, M, G, E,
                             DSV4C_IDS_READY, 0.f, nullptr, st);
    if (e) {
      fprintf(stderr, "moe launch: %d\n", e);
      exit(1);
    }
  };
  cudaGraphExec_t ge = eager_then_graph(st, launch, L);
  float best = 1e30f;
  for (int rep = 0; rep < 3; rep++) best = std::min(best, replay_ms(ge, st)); // (their records are reset below)
  float ms;
  unsigned long long t0;
  const std::vector<unsigned long long> h = traced_replay(ge, st, tr, slots, &ms, &t0);
  const unsigned n = (unsigned)(h.size() / 8);
  std::vector<MoELaunch> lk(2 * L);
  for (unsigned i = 0; i < n; i++) {
    const unsigned long long *r = &h[i * 8];
    const long long j = launch_of(r, y, per);
    if (j < 0 || j >= 2 * L) continue;
    MoELaunch &q = lk[j];
    auto at = [&](int k) { return r[k] ? (double)(r[k] - t0) : 0.0; };
    q.blocks++;
    q.s0 = std::min(q.s0, at(2));
    q.s1 = std::max(q.s1, at(2));
    q.start.push_back(at(2));
    if (r[3]) { // skipped groups record no wait
      q.w0 = std::min(q.w0, at(3));
      q.w1 = std::max(q.w1, at(3));
      q.wait.push_back(at(3));
    }
    if (r[4]) q.xs.push_back(at(4));
    if (r[5]) q.done.push_back(at(5));
    double te = 0;
    for (int k = 5; k <= 7; k++) te = std::max(te, at(k));
    if (te > 0) q.end.push_back(te);
    q.e1 = std::max(q.e1, te);
  }
  const double gb13 = only == 2 ? 0 : 2.0 * G * (w13b + s13b) / 1e9, gb2 = only == 1 ? 0 : (double)G * (w2b + s2b) / 1e9;
  printf("moe fmt %d, %d token(s), %d slots, blocks per launch w1/w3 %d, w2 %d; graph of %d calls: %.2f us per call "
         "(traced replay; best of the 3 before it %.2f); weight GB per call %.4f (w1/w3 %.4f, w2 %.4f)\n",
         fmt, tokens, G, lk[L].blocks, lk[L + 1].blocks, L, ms * 1e3 / L, best * 1e3 / L, gb13 + gb2, gb13, gb2);
  std::vector<double> period, life13, life2, gap13to2, gap2to13, ov13, ov2;
  for (int c = L / 4; c < 3 * L / 4 && only != 0; c++) { // one launch per call
    const MoELaunch &a = lk[2 * c + (only == 2)], &a2 = lk[2 * c + 2 + (only == 2)];
    period.push_back(a2.s0 - a.s0);
    life13.push_back(a.e1 - a.w0);
  }
  if (only != 0)
    printf("medians over calls %d..%d (us): period %.2f | first wait -> last end %.2f\n", L / 4, 3 * L / 4,
           med(period) / 1e3, med(life13) / 1e3);
  for (int c = L / 4; c < 3 * L / 4 && only == 0; c++) {
    const MoELaunch &a = lk[2 * c], &b = lk[2 * c + 1], &a2 = lk[2 * c + 2];
    period.push_back(a2.s0 - a.s0);
    life13.push_back(a.e1 - a.w0);
    life2.push_back(b.e1 - b.w0);
    gap13to2.push_back(b.w0 - a.e1);
    gap2to13.push_back(a2.w0 - b.e1);
    ov2.push_back(a.e1 - b.s0);
    ov13.push_back(b.e1 - a2.s0);
  }
  if (only == 0)
    printf("medians over calls %d..%d (us): period %.2f | w1/w3 first wait -> last end %.2f | w2 first wait -> last end %.2f | "
         "gap w1/w3 last end -> w2 first wait %.2f | gap w2 last end -> next w1/w3 first wait %.2f | w2 first start before "
         "w1/w3 last end %.2f | next w1/w3 first start before w2 last end %.2f\n",
         L / 4, 3 * L / 4, med(period) / 1e3, med(life13) / 1e3, med(life2) / 1e3, med(gap13to2) / 1e3, med(gap2to13) / 1e3,
         med(ov2) / 1e3, med(ov13) / 1e3);
  const int c = L / 2;
  const double base = lk[2 * c].blocks ? lk[2 * c].w0 : lk[2 * c + 1].w0;
  // MOE_DUMP: every block of call c's launches, one line each: "B", launch (0 w1/w3, 1 w2), block,
  // SM, then probes 2-7 in us from base (start, wait release, x staged, stream done, -1, end)
  if (getenv("MOE_DUMP")) {
    for (unsigned i = 0; i < n; i++) {
      const unsigned long long *r = &h[i * 8];
      const long long j = launch_of(r, y, per);
      if (j != 2 * c && j != 2 * c + 1) continue;
      printf("B %lld %u %u", j - 2 * c, (unsigned)(r[1] & 0xffffffffu), (unsigned)(r[1] >> 32));
      for (int k = 2; k <= 7; k++) printf(" %.3f", r[k] ? ((double)(r[k] - t0) - base) / 1e3 : -1.0);
      printf("\n");
    }
  }
  printf("call %d, us from its %s launch's first wait release: p0 / p10 / p50 / p90 / max over blocks\n", c,
         only == 2 ? "w2" : "w1/w3");
  const char *names[2] = {"w1/w3", "w2"};
  for (int j = 0; j < 3; j++) {
    const MoELaunch &q = lk[2 * c + j];
    const char *nm = j < 2 ? names[j] : "next w1/w3";
    auto row = [&](const char *what, const std::vector<double> &v) {
      if (v.empty()) return;
      printf("  %-10s %-7s %7.2f %7.2f %7.2f %7.2f %7.2f\n", nm, what, (pct(v, 0) - base) / 1e3, (pct(v, 0.1) - base) / 1e3,
             (pct(v, 0.5) - base) / 1e3, (pct(v, 0.9) - base) / 1e3, (pct(v, 1.0) - base) / 1e3);
    };
    row("start", q.start);
    row("wait", q.wait);
    row("x", q.xs);
    row("stream", q.done);
    row("end", q.end);
  }
  cudaFree(w13);
  cudaFree(s13);
  cudaFree(w2);
  cudaFree(s2);
  cudaFree(dids);
  cudaFree(x);
  cudaFree(hb);
  cudaFree(y);
  cudaFree(tr);
  cudaFree(al);
  unsigned long long *none = nullptr;
  CK(cudaMemcpyToSymbol(g_trace, &none, sizeof(none)));
  cudaGraphExecDestroy(ge);
  cudaStreamDestroy(st);
}

int main(int argc, char **argv) {
  CK(cudaSetDevice(0));
  if (argc >= 2 && std::string(argv[1]) == "moe") {
    trace_moe(argc >= 3 ? atoi(argv[2]) : DSV4C_FMT_NVFP4, argc >= 4 ? atoi(argv[3]) : 1);
    return 0;
  }
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
