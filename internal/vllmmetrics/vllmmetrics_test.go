package vllmmetrics

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestTokenBuckets: vLLM's build_1_2_5_buckets.
func TestTokenBuckets(t *testing.T) {
	for _, c := range []struct {
		max  int
		want []float64
	}{
		{100, []float64{1, 2, 5, 10, 20, 50, 100}},
		{4096, []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}},
		{1, []float64{1}},
		{0, []float64{1}},
		{-5, []float64{1}},
	} {
		if got := TokenBuckets(c.max); !slices.Equal(got, c.want) {
			t.Errorf("TokenBuckets(%d) = %v, want %v", c.max, got, c.want)
		}
	}
	if n := len(TokenBuckets(1 << 62)); n > 60 {
		t.Errorf("TokenBuckets(2^62): %d buckets", n)
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{"stop": "stop", "tool_calls": "stop", "length": "length", "abort": "abort",
		"error": "error", "repetition": "repetition", "": "stop", "content_filter": "stop"} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRequestTiming: TTFT from arrival at a choice's first token, one ITL
// per later progress, mean time per output token over the tokens after the
// first, e2e at the finish; End counts only unfinished choices; out-of-range
// choices, nil Requests and Requests do nothing.
func TestRequestTiming(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, err := NewRequests(reg, "m", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRequests(reg, "m", 100); err == nil {
		t.Error("registering twice: no error")
	}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := q.Start(t0)
	r.Progress(0, 7, 0, at(1)) // the role chunk: no token yet
	r.Progress(0, 7, 1, at(100))
	r.Progress(1, 7, 2, at(150)) // choice 1's first chunk has two tokens
	r.Progress(0, 7, 3, at(300))
	r.Progress(0, 7, 3, at(350)) // no new token
	r.Progress(0, 7, 5, at(500))
	r.Finish(0, "tool_calls", at(510))
	r.Progress(0, 7, 9, at(600)) // after its finish: ignored
	r.Progress(-1, 7, 9, at(600))
	r.Progress(maxChoices, 7, 9, at(600))
	r.End("abort") // choice 1 is cut
	r.Finish(1, "stop", at(700))
	r.End("abort")

	var nilReq *Request
	nilReq.Progress(0, 1, 1, t0)
	nilReq.Finish(0, "stop", t0)
	nilReq.End("abort")
	(*Requests)(nil).Start(t0).Progress(0, 1, 1, t0)

	check := func(name string, got, want float64) {
		t.Helper()
		if d := got - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("stop", counterValue(t, q.success.WithLabelValues("stop")), 1)
	check("abort", counterValue(t, q.success.WithLabelValues("abort")), 1)
	check("prompt_tokens", counterValue(t, q.promptTokens), 14)
	check("generation_tokens", counterValue(t, q.genTokens), 7)
	sum := func(h prometheus.Histogram) (uint64, float64) {
		m := &dtoMetric{}
		if err := h.Write(&m.Metric); err != nil {
			t.Fatal(err)
		}
		return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
	}
	n, s := sum(q.ttft)
	check("ttft count", float64(n), 2)
	check("ttft sum", s, 0.1+0.15)
	n, s = sum(q.itl)
	check("itl count", float64(n), 2)
	check("itl sum", s, 0.2+0.2)
	n, s = sum(q.tpot)
	check("tpot count", float64(n), 1)
	check("tpot sum", s, 0.4/4)
	n, s = sum(q.e2e)
	check("e2e count", float64(n), 1)
	check("e2e sum", s, 0.51)
	n, s = sum(q.genHist)
	check("generation hist", float64(n)*1000+s, 1005)
}

type dtoMetric struct{ dto.Metric }

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestObserve: chunks pass through unchanged and are recorded; a stream
// error ends the unfinished choices as error (abort when the context is
// done), a consumer that stops early as abort; a nil Requests passes the
// stream as it is.
func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	q, err := NewRequests(reg, "m", 100)
	if err != nil {
		t.Fatal(err)
	}
	chunks := func(fail error) func(func(*dsv4.ChatChunk, error) bool) {
		return func(yield func(*dsv4.ChatChunk, error) bool) {
			for _, ch := range []*dsv4.ChatChunk{
				{Index: 0, RunningUsage: &dsv4.Usage{PromptTokens: 4}},
				{Index: 0, RunningUsage: &dsv4.Usage{PromptTokens: 4, CompletionTokens: 1}},
				{Index: 1, RunningUsage: &dsv4.Usage{PromptTokens: 4, CompletionTokens: 2}, FinishReason: "length"},
			} {
				if !yield(ch, nil) {
					return
				}
			}
			if fail != nil {
				yield(nil, fail)
				return
			}
			yield(&dsv4.ChatChunk{Index: 0, RunningUsage: &dsv4.Usage{PromptTokens: 4, CompletionTokens: 3}, FinishReason: "stop"}, nil)
			yield(&dsv4.ChatChunk{Index: -1, Usage: &dsv4.Usage{PromptTokens: 4, CompletionTokens: 5}}, nil)
		}
	}
	ctx := context.Background()
	n := 0
	for range q.Observe(ctx, time.Now(), chunks(nil)) {
		n++
	}
	if n != 5 {
		t.Errorf("%d chunks passed", n)
	}
	for range q.Observe(ctx, time.Now(), chunks(errors.New("engine"))) {
	}
	for range q.Observe(ctx, time.Now(), chunks(nil)) {
		break // the client went away
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for range q.Observe(done, time.Now(), chunks(errors.New("cancelled"))) {
	}
	for reason, want := range map[string]float64{"stop": 1, "length": 3, "error": 1, "abort": 2} {
		if got := counterValue(t, q.success.WithLabelValues(reason)); got != want {
			t.Errorf("%s = %v, want %v", reason, got, want)
		}
	}
	if got := counterValue(t, q.genTokens); got != 5+3+0+3 { // per run: both choices; up to the error; none; up to the error
		t.Errorf("generation tokens %v", got)
	}
	var nilQ *Requests
	if s := nilQ.Observe(ctx, time.Now(), chunks(nil)); s == nil {
		t.Error("nil Requests: nil stream")
	}
}
