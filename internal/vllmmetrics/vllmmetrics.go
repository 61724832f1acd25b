// Package vllmmetrics exports the Prometheus series of vLLM's V1 engine
// (vllm/v1/metrics/loggers.py, PrometheusStatLogger) under vLLM's own names,
// types, labels and histogram buckets, so that dashboards and alerts written
// for a vLLM server work against the example servers unchanged. The servers
// keep their dsv4_* series beside these.
//
// Every series carries vLLM's two labels: model_name (the served model name)
// and engine ("0": one engine per process, as a vLLM server without data
// parallelism). Counter names end in _total as vLLM's appear on the wire
// (prometheus_client adds the suffix there).
//
// Requests and Request record the request-level series from what a server
// sees of each choice's output: vLLM counts and times each engine request,
// and a request with n choices (or several prompts) is n engine requests
// there, so each choice here is one engine request. The engine-level gauges
// (running and waiting requests, KV cache usage, prefix cache counters) are
// read from a dsv4.Engine's statistics (RegisterEngine).
package vllmmetrics

import (
	"context"
	"iter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsv4go/dsv4go/dsv4"
)

// vLLM's series names as they appear on /metrics.
const (
	NumRequestsRunning          = "vllm:num_requests_running"                  // gauge
	NumRequestsWaiting          = "vllm:num_requests_waiting"                  // gauge
	KVCacheUsagePerc            = "vllm:kv_cache_usage_perc"                   // gauge, 0..1
	PrefixCacheQueries          = "vllm:prefix_cache_queries_total"            // counter, tokens
	PrefixCacheHits             = "vllm:prefix_cache_hits_total"               // counter, tokens
	PromptTokens                = "vllm:prompt_tokens_total"                   // counter
	GenerationTokens            = "vllm:generation_tokens_total"               // counter
	RequestSuccess              = "vllm:request_success_total"                 // counter{finished_reason}
	TimeToFirstToken            = "vllm:time_to_first_token_seconds"           // histogram
	InterTokenLatency           = "vllm:inter_token_latency_seconds"           // histogram
	RequestTimePerOutputToken   = "vllm:request_time_per_output_token_seconds" // histogram
	E2ERequestLatency           = "vllm:e2e_request_latency_seconds"           // histogram
	RequestPromptTokensHist     = "vllm:request_prompt_tokens"                 // histogram
	RequestGenerationTokensHist = "vllm:request_generation_tokens"             // histogram
)

// FinishReasons are the values of request_success_total's finished_reason
// label, vLLM's FINISH_REASON_STRINGS (vllm/v1/engine/__init__.py); vLLM
// creates all of them at start, so each series exists (at 0) before its
// first request, and so does Requests.
var FinishReasons = []string{"stop", "length", "abort", "error", "repetition"}

// Histogram buckets, vLLM's (loggers.py).
var (
	// TTFTBuckets: time_to_first_token_seconds, 0.001 s to 2560 s.
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	// TokenLatencyBuckets: inter_token_latency_seconds and
	// request_time_per_output_token_seconds, 0.01 s to 80 s.
	TokenLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	// RequestLatencyBuckets: e2e_request_latency_seconds, 0.3 s to 7680 s.
	RequestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30,
		40, 50, 60, 120, 240, 480, 960, 1920, 7680}
)

// TokenBuckets returns vLLM's build_1_2_5_buckets(maxModelLen), the buckets
// of the per-request token histograms: 1, 2, 5, 10, 20, 50, ... up to
// maxModelLen. A maxModelLen below 1 gives [1].
func TokenBuckets(maxModelLen int) []float64 {
	out := []float64{1}
	for exp := 1.0; ; exp *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * exp
			if v == 1 {
				continue
			}
			if v > float64(maxModelLen) {
				return out
			}
			out = append(out, v)
		}
	}
}

// Labels returns the constant labels of every series: model_name and
// engine "0".
func Labels(model string) prometheus.Labels {
	return prometheus.Labels{"model_name": model, "engine": "0"}
}

// FinishReason maps an OpenAI finish_reason to vLLM's engine-level one:
// "tool_calls" is the API's name for a generation that stopped (vLLM's
// engine reports "stop" for it); "stop", "length", "abort", "error" and
// "repetition" stay; anything else ("content_filter", "") becomes "stop".
func FinishReason(openai string) string {
	switch openai {
	case "length", "abort", "error", "repetition":
		return openai
	}
	return "stop"
}

// Requests holds the request-level series. Its methods are safe for
// concurrent use; a Request is not (one goroutine drives each). A Requests
// of NewRelayRequests has no token histograms (nil here).
type Requests struct {
	ttft, itl, tpot, e2e    prometheus.Histogram
	promptHist, genHist     prometheus.Histogram
	promptTokens, genTokens prometheus.Counter
	success                 *prometheus.CounterVec
}

// NewRequests registers the request-level series on reg with model's
// labels; maxModelLen (the served context, in tokens) sets the token
// histograms' buckets (TokenBuckets). Errors: reg's, e.g. a series
// registered twice.
func NewRequests(reg prometheus.Registerer, model string, maxModelLen int) (*Requests, error) {
	return newRequests(reg, model, TokenBuckets(maxModelLen))
}

// newRequests registers the request-level series of NewRequests, or
// without the per-choice token series (tok nil) those of NewRelayRequests.
func newRequests(reg prometheus.Registerer, model string, tok []float64) (*Requests, error) {
	labels := Labels(model)
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
	}
	q := &Requests{
		ttft: hist(TimeToFirstToken, "Histogram of time to first token in seconds.", TTFTBuckets),
		itl:  hist(InterTokenLatency, "Histogram of inter-token latency in seconds.", TokenLatencyBuckets),
		e2e:  hist(E2ERequestLatency, "Histogram of e2e request latency in seconds.", RequestLatencyBuckets),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: PromptTokens,
			Help: "Number of prefill tokens processed.", ConstLabels: labels}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: GenerationTokens,
			Help: "Number of generation tokens processed.", ConstLabels: labels}),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestSuccess,
			Help: "Count of successfully processed requests.", ConstLabels: labels}, []string{"finished_reason"}),
	}
	cs := []prometheus.Collector{q.ttft, q.itl, q.e2e, q.promptTokens, q.genTokens, q.success}
	if tok != nil {
		q.tpot = hist(RequestTimePerOutputToken, "Histogram of time_per_output_token_seconds per request.", TokenLatencyBuckets)
		q.promptHist = hist(RequestPromptTokensHist, "Number of prefill tokens processed.", tok)
		q.genHist = hist(RequestGenerationTokensHist, "Number of generation tokens processed.", tok)
		cs = append(cs, q.tpot, q.promptHist, q.genHist)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range FinishReasons {
		q.success.WithLabelValues(r)
	}
	return q, nil
}

// NewRelayRequests registers on reg, with model's labels, the series that a
// relay (a router that forwards responses it does not generate) can
// measure: request_success_total, e2e_request_latency_seconds,
// time_to_first_token_seconds and inter_token_latency_seconds (from the
// chunks it forwards: Request.Output), prompt_tokens_total and
// generation_tokens_total (from the usage the responses carry:
// Request.Usage). The per-request token histograms and
// request_time_per_output_token_seconds need each choice's token count,
// which a relay does not see, and are not registered. Errors: reg's.
func NewRelayRequests(reg prometheus.Registerer, model string) (*Requests, error) {
	return newRequests(reg, model, nil)
}

// Start begins recording one request that arrived at arrival. A nil q
// gives a Request that records nothing.
func (q *Requests) Start(arrival time.Time) *Request {
	return &Request{q: q, arrival: arrival}
}

// Request records one request's choices. Not safe for concurrent use.
type Request struct {
	q       *Requests
	arrival time.Time
	choices []*choiceState // by choice index
	ended   bool
}

type choiceState struct {
	prompt, tokens int // prompt tokens; tokens generated so far
	first, last    time.Time
	started, done  bool
	counted        bool // tokens known (Progress), not only outputs (Output)
}

// maxChoices bounds the choice indices a Request tracks (a server's n and
// prompt counts are far below it); progress of a higher index is ignored.
const maxChoices = 1 << 16

func (r *Request) choice(i int) *choiceState {
	if i < 0 || i >= maxChoices {
		return nil
	}
	for len(r.choices) <= i {
		r.choices = append(r.choices, nil)
	}
	if r.choices[i] == nil {
		r.choices[i] = &choiceState{}
	}
	return r.choices[i]
}

// Progress records choice i's running usage at now: its prompt's tokens and
// the tokens it has generated so far. Tokens beyond the last call's are
// added to generation_tokens_total. The first call with tokens > 0 is the
// choice's first token, as vLLM counts it: time_to_first_token_seconds
// (from arrival) and the prompt's tokens in prompt_tokens_total; each later
// call with new tokens observes one inter_token_latency_seconds, the time
// since the previous one (tokens a server holds back, e.g. an incomplete
// UTF-8 character, arrive together and count as one interval).
func (r *Request) Progress(i, promptTokens, tokens int, now time.Time) {
	if r == nil || r.q == nil || r.ended {
		return
	}
	c := r.choice(i)
	if c == nil || c.done || tokens <= c.tokens {
		return
	}
	r.q.genTokens.Add(float64(tokens - c.tokens))
	c.tokens = tokens
	c.prompt = promptTokens
	c.counted = true
	if !c.started {
		r.q.promptTokens.Add(float64(max(promptTokens, 0)))
	}
	r.output(c, now)
}

// Output records that choice i's output advanced at now, for a relay that
// sees chunks but not their tokens: its first call is the choice's first
// token (time_to_first_token_seconds), each later one an
// inter_token_latency_seconds interval. Nothing is counted.
func (r *Request) Output(i int, now time.Time) {
	if r == nil || r.q == nil || r.ended {
		return
	}
	if c := r.choice(i); c != nil && !c.done {
		r.output(c, now)
	}
}

// Usage adds a response's token counts to prompt_tokens_total (prompt: the
// prompt tokens of all its choices, a prompt counted once per choice as
// vLLM counts it) and generation_tokens_total (generated), for a relay that
// learns them from the response's usage. Negative counts add nothing.
func (r *Request) Usage(prompt, generated int) {
	if r == nil || r.q == nil {
		return
	}
	r.q.promptTokens.Add(float64(max(prompt, 0)))
	r.q.genTokens.Add(float64(max(generated, 0)))
}

func (r *Request) output(c *choiceState, now time.Time) {
	if !c.started {
		c.started = true
		c.first = now
		r.q.ttft.Observe(now.Sub(r.arrival).Seconds())
	} else {
		r.q.itl.Observe(now.Sub(c.last).Seconds())
	}
	c.last = now
}

// Finish records that choice i finished at now with the OpenAI finish
// reason reason (mapped by FinishReason): request_success_total, and its
// e2e latency, prompt and generation token counts and mean time per output
// token (the time from its first token to its last over the tokens after
// the first; 0 with one token or none, as vLLM). A choice finishes once.
func (r *Request) Finish(i int, reason string, now time.Time) {
	if r == nil || r.q == nil || r.ended {
		return
	}
	c := r.choice(i)
	if c == nil || c.done {
		return
	}
	c.done = true
	q := r.q
	q.success.WithLabelValues(FinishReason(reason)).Inc()
	q.e2e.Observe(now.Sub(r.arrival).Seconds())
	if !c.counted || q.promptHist == nil {
		return // a relay's choice: its tokens are not known
	}
	q.promptHist.Observe(float64(c.prompt))
	q.genHist.Observe(float64(c.tokens))
	tpot := 0.0
	if c.tokens > 1 {
		tpot = c.last.Sub(c.first).Seconds() / float64(c.tokens-1)
	}
	q.tpot.Observe(tpot)
}

// End closes the request: each choice seen but not finished counts in
// request_success_total under reason ("abort": the client went away;
// "error": the engine failed), and so does the request itself when no
// choice was seen at all. Nothing else is observed for them. Later calls
// do nothing.
func (r *Request) End(reason string) {
	if r == nil || r.q == nil || r.ended {
		return
	}
	r.ended = true
	reason = FinishReason(reason)
	seen := false
	for _, c := range r.choices {
		if c == nil {
			continue
		}
		seen = true
		if !c.done {
			c.done = true
			r.q.success.WithLabelValues(reason).Inc()
		}
	}
	if !seen {
		r.q.success.WithLabelValues(reason).Inc()
	}
}

// Chunk records one chunk of a dsv4 chat or completions stream
// (dsv4.Engine.ChatStream, CompleteStream) at now: its choice's running
// usage (Progress) and finish reason (Finish). The final usage chunk
// (Index -1) and chunks without running usage or finish add nothing.
func (r *Request) Chunk(ch *dsv4.ChatChunk, now time.Time) {
	if ch == nil || ch.Index < 0 {
		return
	}
	if u := ch.RunningUsage; u != nil {
		r.Progress(ch.Index, u.PromptTokens, u.CompletionTokens, now)
	}
	if ch.FinishReason != "" {
		r.Finish(ch.Index, ch.FinishReason, now)
	}
}

// Observe returns stream with each chunk recorded (Chunk) as it passes,
// for a server that writes the stream itself. When the stream yields an
// error, or its consumer stops early, or it ends after ctx (the request's)
// is done, the unfinished choices end (End) as "abort" if ctx is done or
// the consumer stopped (the client went away), else "error". A nil q
// records nothing and returns stream.
func (q *Requests) Observe(ctx context.Context, arrival time.Time, stream iter.Seq2[*dsv4.ChatChunk, error]) iter.Seq2[*dsv4.ChatChunk, error] {
	if q == nil {
		return stream
	}
	return func(yield func(*dsv4.ChatChunk, error) bool) {
		r := q.Start(arrival)
		for ch, err := range stream {
			if err != nil {
				if ctx.Err() != nil {
					r.End("abort")
				} else {
					r.End("error")
				}
				yield(nil, err)
				return
			}
			r.Chunk(ch, time.Now())
			if !yield(ch, nil) {
				r.End("abort")
				return
			}
		}
		if ctx.Err() != nil {
			r.End("abort")
		}
	}
}

// RegisterEngine registers on reg, with model's labels, vLLM's engine
// series read from stats (a dsv4.Engine's Stats) at each scrape:
// num_requests_running and num_requests_waiting (engine sequences, one per
// choice, as vLLM's engine requests), prefix_cache_queries_total and
// prefix_cache_hits_total (prompt tokens looked up and restored), and, when
// the engine has a state budget (EngineStats.StateBudget > 0 now),
// kv_cache_usage_perc: the share of the budget reserved by admitted
// requests, which admission waits on as vLLM's waits on free KV blocks (a
// request reserves its worst case, prompt + max_tokens, where vLLM
// allocates blocks as it goes). Without a budget there is no share, and no
// series. Errors: reg's.
func RegisterEngine(reg prometheus.Registerer, model string, stats func() dsv4.EngineStats) error {
	labels := Labels(model)
	gauge := func(name, help string, v func(dsv4.EngineStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return v(stats()) })
	}
	counter := func(name, help string, v func(dsv4.EngineStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return v(stats()) })
	}
	cs := []prometheus.Collector{
		gauge(NumRequestsRunning, "Number of requests in model execution batches.",
			func(s dsv4.EngineStats) float64 { return float64(s.Running) }),
		gauge(NumRequestsWaiting, "Number of requests waiting to be processed.",
			func(s dsv4.EngineStats) float64 { return float64(s.Waiting) }),
		counter(PrefixCacheQueries, "Prefix cache queries, in terms of number of queried tokens.",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheQueries) }),
		counter(PrefixCacheHits, "Prefix cache hits, in terms of number of cached tokens.",
			func(s dsv4.EngineStats) float64 { return float64(s.PrefixCacheHits) }),
	}
	if stats().StateBudget > 0 {
		cs = append(cs, gauge(KVCacheUsagePerc, "KV-cache usage. 1 means 100 percent usage.", func(s dsv4.EngineStats) float64 {
			if s.StateBudget <= 0 {
				return 0
			}
			return min(float64(s.StateBytes)/float64(s.StateBudget), 1)
		}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
