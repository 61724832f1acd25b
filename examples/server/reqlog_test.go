package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// recordHandler is a slog.Handler that keeps the records it is given.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
	got  chan struct{}
}

func newRecordHandler() *recordHandler { return &recordHandler{got: make(chan struct{}, 100)} }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	h.got <- struct{}{}
	return nil
}

// requests returns the "request" records' attributes.
func (h *recordHandler) requests() []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.recs {
		if r.Message != "request" || r.Level != slog.LevelInfo {
			continue
		}
		m := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.Resolve()
			return true
		})
		out = append(out, m)
	}
	return out
}

// TestRequestLog: each finished chat or completions request is logged as
// one INFO line (vLLM logs every request unless --disable-log-requests)
// with its method, path, status, response id, model, token counts, finish
// reasons, TTFT, duration and remote address, and never the prompt; with
// DisableLogRequests (the --disable-log-requests flag) nothing is logged.
func TestRequestLog(t *testing.T) {
	const secret = "count 3 secretword"
	const cprompt = "<｜User｜>" + secret + "<｜Assistant｜></think>" // the mock answers after the assistant turn
	for _, tc := range []struct {
		name, path, body string
		stream           bool
		status           int
		model            string
		finishes         string // finish_reasons, comma-joined
		tokens           bool   // token counts, id and ttft expected
	}{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + secret + `"}],"temperature":0}`, false, 200, "dsv4-script", "stop", true},
		{"chat stream", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + secret + `"}],"temperature":0,"stream":true}`, true, 200, "dsv4-script", "stop", true},
		{"completions n=2", "/v1/completions", `{"prompt":"` + cprompt + `","max_tokens":2,"n":2,"model":"dsv4-script"}`, false, 200, "dsv4-script", "length,length", true},
		{"completions stream", "/v1/completions", `{"prompt":"` + cprompt + `","max_tokens":2,"stream":true}`, true, 200, "dsv4-script", "length", true},
		{"unknown model", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"` + secret + `"}]}`, false, 404, "nope", "", false},
		{"bad json", "/v1/completions", `{"prompt":`, false, 400, "dsv4-script", "", false},
	} {
		for _, disabled := range []bool{false, true} {
			name := tc.name
			if disabled {
				name += " disabled"
			}
			t.Run(name, func(t *testing.T) {
				h := newRecordHandler()
				ts := startServer(t, ServerConfig{Logger: slog.New(h), DisableLogRequests: disabled}, dsv4.EngineOptions{}, 0)
				status, body := post(t, ts.URL, tc.path, tc.body)
				if status != tc.status {
					t.Fatalf("status %d: %s", status, body)
				}
				if disabled {
					time.Sleep(20 * time.Millisecond)
					if recs := h.requests(); len(recs) != 0 {
						t.Fatalf("DisableLogRequests: logged %v", recs)
					}
					return
				}
				select {
				case <-h.got:
				case <-time.After(5 * time.Second):
					t.Fatal("no log line")
				}
				recs := h.requests()
				if len(recs) != 1 {
					t.Fatalf("%d request lines, want 1: %v", len(recs), recs)
				}
				a := recs[0]
				str := func(k string) string {
					v, ok := a[k]
					if !ok {
						t.Errorf("no %s attribute", k)
					}
					return v.String()
				}
				num := func(k string) int64 {
					v, ok := a[k]
					if !ok || v.Kind() != slog.KindInt64 {
						t.Errorf("%s = %v, want an int", k, v)
					}
					return v.Int64()
				}
				if str("method") != "POST" || str("path") != tc.path || num("status") != int64(tc.status) || str("model") != tc.model {
					t.Errorf("line %v", a)
				}
				if got := strings.Join(a["finish_reasons"].Any().([]string), ","); got != tc.finishes {
					t.Errorf("finish_reasons %q, want %q", got, tc.finishes)
				}
				if !strings.HasPrefix(str("remote_addr"), "127.0.0.1:") {
					t.Errorf("remote_addr %q", str("remote_addr"))
				}
				dur := a["duration_ms"]
				if dur.Kind() != slog.KindFloat64 || dur.Float64() < 0 {
					t.Errorf("duration_ms %v", dur)
				}
				id := str("request_id")
				pt, ct := num("prompt_tokens"), num("completion_tokens")
				ttft, hasTTFT := a["ttft_ms"]
				if tc.tokens {
					// the id is the response's
					want := ""
					if tc.stream {
						line, _, _ := strings.Cut(strings.TrimPrefix(string(body), "data: "), "\n")
						body = []byte(line)
					}
					var r struct{ ID string }
					if json.Unmarshal(body, &r) == nil {
						want = r.ID
					}
					if id == "" || id != want {
						t.Errorf("request_id %q, want the response id %q", id, want)
					}
					if pt <= 0 || ct <= 0 {
						t.Errorf("prompt_tokens %d completion_tokens %d", pt, ct)
					}
					if !hasTTFT || ttft.Float64() < 0 || ttft.Float64() > dur.Float64() {
						t.Errorf("ttft_ms %v (duration %v)", ttft, dur)
					}
				} else if id != "" || pt != 0 || ct != 0 || hasTTFT {
					t.Errorf("failed request: id %q tokens %d/%d ttft %v", id, pt, ct, ttft)
				}
				for k, v := range a {
					if strings.Contains(v.String(), "secretword") {
						t.Errorf("attribute %s holds the prompt: %v", k, v)
					}
				}
			})
		}
	}
}
