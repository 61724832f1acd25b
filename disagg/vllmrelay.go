package disagg

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsv4go/dsv4go/internal/vllmmetrics"
)

// relayMetrics are the router's vLLM-named series (package
// internal/vllmmetrics, NewRelayRequests): what the router measures of the
// generation responses it forwards, labelled with the model_name each
// response names (its "model") and engine "0". Counted, as vLLM counts
// engine requests, per choice: request_success_total{finished_reason} at
// each choice's finish_reason (tool_calls as stop), its
// e2e_request_latency_seconds from the router's arrival to the finish
// passing through; time_to_first_token_seconds and
// inter_token_latency_seconds of streamed choices (the chunks that carry
// output; a non-streamed answer shows no token times); prompt_tokens_total
// (usage.prompt_tokens times the request's n) and generation_tokens_total
// from the usage a response carries (non-streamed answers, streams with
// stream_options.include_usage). A stream cut after its first byte counts
// its unfinished choices as abort (the client went away) or error (the
// worker failed). Rejected requests (4xx) and those no worker answered
// count nowhere here, as in vLLM.
type relayMetrics struct {
	reg     prometheus.Registerer
	mu      sync.Mutex
	byModel map[string]*vllmmetrics.Requests
}

// maxRelayModels bounds the model names labelled (a fleet serves a few);
// responses naming others are not measured.
const maxRelayModels = 64

// Limits of what a relayWatch parses: a non-streamed answer longer than
// relayMaxJSON, or an SSE line longer than relayMaxLine, is forwarded
// unmeasured.
const (
	relayMaxJSON = 16 << 20
	relayMaxLine = 4 << 20
)

func newRelayMetrics(reg prometheus.Registerer) *relayMetrics {
	return &relayMetrics{reg: reg, byModel: map[string]*vllmmetrics.Requests{}}
}

// forModel returns model's series, registering them on first use (nil: too
// many models, or a name the registry refuses).
func (m *relayMetrics) forModel(model string) *vllmmetrics.Requests {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := m.byModel[model]; ok {
		return q
	}
	if len(m.byModel) >= maxRelayModels {
		return nil
	}
	q, err := vllmmetrics.NewRelayRequests(m.reg, model)
	if err != nil {
		q = nil
	}
	m.byModel[model] = q
	return q
}

// relayWatch is the client's http.ResponseWriter during a generation
// request: it passes everything through and measures the 200 answer it
// carries (relayMetrics).
type relayWatch struct {
	http.ResponseWriter
	m       *relayMetrics
	arrival time.Time
	n       int // the request's n
	status  int
	sse     bool
	line    []byte // an SSE line not yet ended
	body    []byte // the non-streamed answer so far
	skip    bool   // over a limit: not measured
	req     *vllmmetrics.Request
}

func newRelayWatch(w http.ResponseWriter, m *relayMetrics, arrival time.Time, raw map[string]json.RawMessage) *relayWatch {
	n := 1
	if v, ok := raw["n"]; ok {
		if json.Unmarshal(v, &n) != nil || n < 1 {
			n = 1
		}
	}
	return &relayWatch{ResponseWriter: w, m: m, arrival: arrival, n: n}
}

// Unwrap gives http.ResponseController the client's writer (Flush).
func (w *relayWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *relayWatch) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.sse = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *relayWatch) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	if w.status == http.StatusOK && !w.skip {
		w.observe(b[:n], time.Now())
	}
	return n, err
}

// observe parses forwarded bytes: SSE events as their lines end, a JSON
// answer whole (at end).
func (w *relayWatch) observe(b []byte, now time.Time) {
	if !w.sse {
		if len(w.body)+len(b) > relayMaxJSON {
			w.skip, w.body = true, nil
			return
		}
		w.body = append(w.body, b...)
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.line)+len(b) > relayMaxLine {
				w.skip, w.line = true, nil
				return
			}
			w.line = append(w.line, b...)
			return
		}
		line := b[:i]
		if len(w.line) > 0 {
			w.line = append(w.line, line...)
			line = w.line
		}
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			w.event(bytes.TrimSpace(d), now, true)
		}
		w.line = w.line[:0]
		b = b[i+1:]
	}
}

// relayEvent is what relayWatch reads of a chunk or an answer.
type relayEvent struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Content          string            `json:"content"`
			ReasoningContent string            `json:"reasoning_content"`
			ToolCalls        []json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// event records one SSE event's data (stream) or a whole answer.
func (w *relayWatch) event(data []byte, now time.Time, stream bool) {
	if len(data) == 0 || data[0] != '{' {
		return // [DONE], or not a chunk
	}
	var ev relayEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	if w.req == nil {
		if ev.Model == "" {
			return
		}
		q := w.m.forModel(ev.Model)
		if q == nil {
			w.skip = true
			return
		}
		w.req = q.Start(w.arrival)
	}
	for _, c := range ev.Choices {
		if stream && (c.Text != "" || c.Delta != nil && (c.Delta.Content != "" || c.Delta.ReasoningContent != "" || len(c.Delta.ToolCalls) > 0)) {
			w.req.Output(c.Index, now)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			w.req.Finish(c.Index, *c.FinishReason, now)
		}
	}
	// A stream's usage: the last chunk's, without choices (chunks with
	// choices and usage are continuous_usage_stats, running totals).
	if ev.Usage != nil && (!stream || len(ev.Choices) == 0) {
		w.req.Usage(ev.Usage.PromptTokens*w.n, ev.Usage.CompletionTokens)
	}
}

// done ends the measure: a non-streamed answer is read now; a request that
// failed after its first byte (failed) ends its unfinished choices as abort
// when the client went away (cancelled), else error.
func (w *relayWatch) done(failed, cancelled bool) {
	if !w.sse && w.status == http.StatusOK && !w.skip && len(w.body) > 0 {
		w.event(bytes.TrimSpace(w.body), time.Now(), false)
		w.body = nil
	}
	switch {
	case cancelled:
		w.req.End("abort")
	case failed:
		w.req.End("error")
	}
}
