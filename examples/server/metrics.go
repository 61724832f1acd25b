package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/vllmmetrics"
)

// metrics are the Prometheus series of the server: the dsv4_* ones, named
// after vLLM's and SGLang's (prefix dsv4_ instead of vllm: / sglang:) and
// counted per HTTP request, and vLLM's own vllm:* series with vLLM's
// semantics (package vllmmetrics: per choice, vLLM's buckets and labels),
// for dashboards written against vLLM.
type metrics struct {
	ttft, itl, e2e          prometheus.Histogram
	promptTokens, genTokens prometheus.Counter
	success                 *prometheus.CounterVec
	errors                  *prometheus.CounterVec
	vllm                    *vllmmetrics.Requests
}

// latency buckets in seconds, as vLLM's TTFT/ITL families
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	itlBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 10}
	e2eBuckets  = []float64{0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}
)

func newMetrics(reg *prometheus.Registry, eng *dsv4.Engine, model string) *metrics {
	labels := prometheus.Labels{"model_name": model}
	m := &metrics{
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_time_to_first_token_seconds",
			Help: "Time from request arrival to the first generated token.", Buckets: ttftBuckets, ConstLabels: labels}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_inter_token_latency_seconds",
			Help: "Time between successive streamed tokens of a request.", Buckets: itlBuckets, ConstLabels: labels}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_e2e_request_latency_seconds",
			Help: "Time from request arrival to its last token.", Buckets: e2eBuckets, ConstLabels: labels}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_prompt_tokens_total",
			Help: "Prompt tokens of finished requests.", ConstLabels: labels}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_generation_tokens_total",
			Help: "Generated tokens of finished requests.", ConstLabels: labels}),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dsv4_request_success_total",
			Help: "Finished requests by finish reason.", ConstLabels: labels}, []string{"finished_reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dsv4_request_errors_total",
			Help: "Rejected or failed requests by endpoint and cause.", ConstLabels: labels}, []string{"endpoint", "cause"}),
	}
	reg.MustRegister(m.ttft, m.itl, m.e2e, m.promptTokens, m.genTokens, m.success, m.errors)
	vreq, err := vllmmetrics.NewRequests(reg, model, eng.MaxContext())
	if err == nil {
		err = vllmmetrics.RegisterEngine(reg, model, eng.Stats)
	}
	if err != nil {
		panic(err) // a fresh registry: only a programming error gets here
	}
	m.vllm = vreq
	// Series read from the engine's counters at each scrape.
	type engineSeries struct {
		counter    bool // a counter, else a gauge
		name, help string
		value      func(dsv4.EngineStats) float64
	}
	for _, es := range []engineSeries{
		{false, "dsv4_num_requests_running", "Sequences admitted to the engine (prefilling or decoding).",
			func(s dsv4.EngineStats) float64 { return float64(s.Running) }},
		{false, "dsv4_num_requests_waiting", "Sequences queued for admission.",
			func(s dsv4.EngineStats) float64 { return float64(s.Waiting) }},
		{false, "dsv4_live_sequences", "Sequences holding KV state.",
			func(s dsv4.EngineStats) float64 { return float64(s.LiveSequences) }},
		{false, "dsv4_state_memory_bytes", "KV state memory reserved by running sequences.",
			func(s dsv4.EngineStats) float64 { return float64(s.StateBytes) }},
		{false, "dsv4_state_memory_budget_bytes", "KV state memory budget (0: unlimited).",
			func(s dsv4.EngineStats) float64 { return float64(s.StateBudget) }},
		{true, "dsv4_engine_decode_steps_total", "Batched decode steps run by the engine.",
			func(s dsv4.EngineStats) float64 { return float64(s.DecodeSteps) }},
		{true, "dsv4_prefix_cache_queries_total", "Prefix cache queries, in prompt tokens looked up (vLLM's prefix_cache_queries).",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheQueries) }},
		{true, "dsv4_prefix_cache_hits_total", "Prefix cache hits, in prompt tokens restored instead of prefilled (vLLM's prefix_cache_hits).",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheHits) }},
		{false, "dsv4_prefix_cache_bytes", "Memory held by the prefix cache's saved states.",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheBytes) }},
		{false, "dsv4_prefix_cache_budget_bytes", "Prefix cache budget (0: prefix caching off).",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheBudget) }},
		{false, "dsv4_prefix_cache_entries", "Saved prefix states in the prefix cache.",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheEntries) }},
		{true, "dsv4_constraint_cache_hits_total", "Structured-output constraints served from the cache of compiled constraints, without compiling them.",
			func(s dsv4.EngineStats) float64 { return float64(s.ConstraintCacheHits) }},
		{true, "dsv4_constraint_cache_misses_total", "Structured-output constraints compiled through the cache (failed compilations included).",
			func(s dsv4.EngineStats) float64 { return float64(s.ConstraintCacheMisses) }},
		{false, "dsv4_constraint_cache_bytes", "Memory held by the compiled constraints kept (automata, cached DFA states and masks).",
			func(s dsv4.EngineStats) float64 { return float64(s.ConstraintCacheBytes) }},
		{false, "dsv4_constraint_cache_budget_bytes", "Budget of the cache of compiled constraints (0: off; --constraint-cache-mb).",
			func(s dsv4.EngineStats) float64 { return float64(s.ConstraintCacheBudget) }},
		{false, "dsv4_constraint_cache_entries", "Compiled constraints kept in the cache.",
			func(s dsv4.EngineStats) float64 { return float64(s.ConstraintCacheEntries) }},
	} {
		read := func() float64 { return es.value(eng.Stats()) }
		if es.counter {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: es.name, Help: es.help, ConstLabels: labels}, read))
		} else {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: es.name, Help: es.help, ConstLabels: labels}, read))
		}
	}
	return m
}

// observer times one request.
type observer struct {
	m      *metrics
	start  time.Time
	last   time.Time
	first  bool
	closed bool
	rec    *reqRecord // the request's log record (nil: none)
	vllm   *vllmmetrics.Request
	ctx    context.Context // the request's
}

func (m *metrics) observer(ctx context.Context, start time.Time) *observer {
	return &observer{m: m, start: start, vllm: m.vllm.Start(start), ctx: ctx}
}

// cut records, in vllm:request_success_total, the choices of a request that
// ended before they finished: finished_reason "abort" when the client went
// away (ctx, the request's, is done), else "error" (the engine failed).
func (o *observer) cut(ctx context.Context) {
	if ctx.Err() != nil {
		o.vllm.End("abort")
	} else {
		o.vllm.End("error")
	}
}

// chunk records a streamed chunk: TTFT at the first one with output, ITL
// between later ones; the vllm:* series per choice, from the chunk's
// running usage (tokens generated) and finish reason.
func (o *observer) chunk(ch *dsv4.ChatChunk) {
	o.vllm.Chunk(ch, time.Now())
	d := &ch.Delta
	if d.Content == "" && d.ReasoningContent == "" && len(d.ToolCalls) == 0 {
		return
	}
	now := time.Now()
	if !o.first {
		o.first = true
		o.m.ttft.Observe(now.Sub(o.start).Seconds())
		if o.rec != nil {
			o.rec.first = now
		}
	} else {
		o.m.itl.Observe(now.Sub(o.last).Seconds())
	}
	o.last = now
}

func (o *observer) done(u dsv4.Usage, choices []dsv4.ChatChoice) {
	reasons := make([]string, len(choices))
	for i, c := range choices {
		reasons[i] = c.FinishReason
	}
	o.doneReasons(u, reasons)
}

func (o *observer) doneReasons(u dsv4.Usage, reasons []string) {
	if o.closed {
		return
	}
	o.closed = true
	if o.ctx != nil && o.ctx.Err() != nil {
		// The stream ended because the client went away (the engine stops
		// a cancelled choice without an error): its unfinished choices
		// were aborted.
		o.vllm.End("abort")
	}
	if o.rec != nil {
		o.rec.usage, o.rec.finishes = u, reasons
	}
	o.m.e2e.Observe(time.Since(o.start).Seconds())
	o.m.promptTokens.Add(float64(u.PromptTokens))
	o.m.genTokens.Add(float64(u.CompletionTokens))
	for _, r := range reasons {
		o.m.success.WithLabelValues(r).Inc()
	}
}

// failed records a stream that ended without its usage:
// dsv4_request_errors_total{endpoint="stream",cause="aborted"}, and the
// vllm:* end of its unfinished choices (cut).
func (o *observer) failed(ctx context.Context) {
	o.cut(ctx)
	if !o.closed {
		o.closed = true
		o.m.errors.WithLabelValues("stream", "aborted").Inc()
	}
}
