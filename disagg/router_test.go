package disagg

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type recorder struct {
	mu     sync.Mutex
	bodies []string
	calls  atomic.Int64
}

func (r *recorder) add(b []byte) {
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	r.calls.Add(1)
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[len(r.bodies)-1]
}

func fakeServer(t *testing.T, rec *recorder, h func(w http.ResponseWriter, body map[string]json.RawMessage)) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/server_info":
			io.WriteString(w, `{}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		rec.add(b)
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		h(w, m)
	}))
	t.Cleanup(s.Close)
	return s
}

func routerFor(t *testing.T, cfg RouterConfig) string {
	t.Helper()
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = -1
	}
	rt, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { s.Close(); rt.Close() })
	return s.URL
}

// TestRouterPassthrough: PD concurrent dispatch sends the client's JSON to
// both servers with only the router-owned fields changed, and merges the
// prefill side's usage details.
func TestRouterPassthrough(t *testing.T) {
	var pr, dr recorder
	p := fakeServer(t, &pr, func(w http.ResponseWriter, m map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`)
	})
	d := fakeServer(t, &dr, func(w http.ResponseWriter, m map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},"extra_field":[1.50]}`)
	})
	url := routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: p.URL, BootstrapPort: 8998}}, Decode: []string{d.URL}})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"chat_template_kwargs":{"thinking":true},"x_unknown":{"a":[1,2.50,"é"]},"bootstrap_room":1,"temperature":0}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var in map[string]json.RawMessage
	json.Unmarshal([]byte(body), &in)
	for name, got := range map[string]string{"prefill": pr.last(), "decode": dr.last()} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(got), &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range in {
			if k == "bootstrap_room" {
				continue
			}
			if string(m[k]) != string(v) {
				t.Errorf("%s: field %s = %s, want %s", name, k, m[k], v)
			}
		}
		if string(m["bootstrap_room"]) == "1" || m["bootstrap_host"] == nil || string(m["bootstrap_port"]) != "8998" {
			t.Errorf("%s: router-owned fields not set: %s", name, got)
		}
	}
	if pr.last() != dr.last() {
		t.Error("prefill and decode got different bodies")
	}
	var r struct {
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Extra json.RawMessage `json:"extra_field"`
	}
	json.Unmarshal(out, &r)
	if r.Usage.Details.Cached != 2 || string(r.Extra) != "[1.50]" {
		t.Errorf("merged answer: %s", out)
	}
}

// TestRouterRetries: a 5xx before the first byte is retried on another
// worker; a stream that breaks after its first bytes is not.
func TestRouterRetries(t *testing.T) {
	var ar, br, cr recorder
	a := fakeServer(t, &ar, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "", "busy")
	})
	b := fakeServer(t, &br, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		io.WriteString(w, `{"ok":true}`)
	})
	url := routerFor(t, RouterConfig{Workers: []string{a.URL, b.URL}, Policy: "round_robin"})
	for range 4 {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(out) != `{"ok":true}` {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	if ar.calls.Load() == 0 || br.calls.Load() != 4 {
		t.Fatalf("calls a=%d b=%d", ar.calls.Load(), br.calls.Load())
	}
	// c starts a stream then dies: no retry (bytes were sent).
	c := fakeServer(t, &cr, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"x\":1}\n\n")
		w.(http.Flusher).Flush()
		hj, _, _ := w.(http.Hijacker).Hijack()
		hj.Close()
	})
	before := br.calls.Load()
	url2 := routerFor(t, RouterConfig{Workers: []string{c.URL, b.URL}, Policy: "round_robin"})
	resp, err := http.Post(url2+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(out), "data: {\"x\":1}") || br.calls.Load() != before {
		t.Fatalf("mid-stream failure: %q, b calls %d→%d", out, before, br.calls.Load())
	}
	// 4xx is the request's fault: not retried.
	bad := fakeServer(t, &cr, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "bad")
	})
	url3 := routerFor(t, RouterConfig{Workers: []string{bad.URL, b.URL}, Policy: "round_robin"})
	resp, _ = http.Post(url3+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("4xx: %d", resp.StatusCode)
	}
}

// TestRouterStreamsThrough: SSE events reach the client while the upstream
// is still generating.
func TestRouterStreamsThrough(t *testing.T) {
	release := make(chan struct{})
	var rec recorder
	up := fakeServer(t, &rec, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: [DONE]\n\n")
	})
	url := routerFor(t, RouterConfig{Workers: []string{up.URL}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != "data: first" {
		t.Fatalf("first event: %q", sc.Text())
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("rest %q", rest)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatal("content type not passed through")
	}
}

func TestPolicies(t *testing.T) {
	ws := []*Worker{{URL: "a"}, {URL: "b"}, {URL: "c"}}
	rr, _ := NewPolicy("round_robin")
	var seq []string
	for range 6 {
		seq = append(seq, rr.Pick(ws, "").URL)
	}
	if strings.Join(seq, "") != "abcabc" {
		t.Fatalf("round robin %v", seq)
	}
	ws[0].inflight.Store(5)
	ws[1].inflight.Store(5)
	p2, _ := NewPolicy("power_of_two")
	for range 50 {
		if w := p2.Pick(ws[:2], ""); w.URL != "a" && w.URL != "b" {
			t.Fatal(w.URL)
		}
	}
	ws[0].inflight.Store(0)
	ws[1].inflight.Store(0)
	ca, _ := NewPolicy("cache_aware")
	long := strings.Repeat("system prompt shared by many requests. ", 10)
	first := ca.Pick(ws, long+"question one")
	for range 5 {
		if w := ca.Pick(ws, long+"question two"); w != first {
			t.Fatalf("cache_aware moved a shared prefix from %s to %s", first.URL, w.URL)
		}
	}
	first.inflight.Store(200) // imbalance beats the cache
	if w := ca.Pick(ws, long+"question three"); w == first {
		t.Fatal("cache_aware ignored a 200-request imbalance")
	}
	if _, err := NewPolicy("nope"); err == nil {
		t.Fatal("unknown policy accepted")
	}
	var rnd, _ = NewPolicy("random")
	seen := map[string]bool{}
	for range 100 {
		seen[rnd.Pick(ws, "").URL] = true
	}
	if len(seen) != 3 {
		t.Fatalf("random saw %v", seen)
	}
}

func TestCircuitBreakerAndHealth(t *testing.T) {
	var rec recorder
	up := fakeServer(t, &rec, func(w http.ResponseWriter, _ map[string]json.RawMessage) {})
	rt, err := NewRouter(RouterConfig{Workers: []string{up.URL}, HealthInterval: -1, BreakerFailures: 2, BreakerCooldown: 50 * time.Millisecond, HealthFailures: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	w := rt.Workers()[0]
	rt.report(w, false)
	if !w.available(time.Now()) {
		t.Fatal("opened after one failure")
	}
	// /workers: healthy is false while the breaker is open, with a reason
	workers := func() (healthy, open bool, reason string) {
		t.Helper()
		rec := httptest.NewRecorder()
		rt.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/workers", nil))
		var ws []struct {
			Healthy bool   `json:"healthy"`
			Open    bool   `json:"breaker_open"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ws); err != nil || len(ws) != 1 {
			t.Fatalf("/workers: %s %v", rec.Body, err)
		}
		return ws[0].Healthy, ws[0].Open, ws[0].Reason
	}
	if h, o, _ := workers(); !h || o {
		t.Fatalf("/workers before the breaker opens: healthy %v breaker_open %v", h, o)
	}
	rt.report(w, false)
	if w.available(time.Now()) {
		t.Fatal("breaker did not open")
	}
	if h, o, reason := workers(); h || !o || !strings.Contains(reason, "breaker") {
		t.Fatalf("/workers with the breaker open: healthy %v breaker_open %v reason %q", h, o, reason)
	}
	time.Sleep(60 * time.Millisecond)
	if !w.available(time.Now()) {
		t.Fatal("breaker did not half-open after the cooldown")
	}
	if h, o, _ := workers(); !h || o {
		t.Fatalf("/workers after the cooldown: healthy %v breaker_open %v", h, o)
	}
	rt.report(w, false) // a failure while half-open re-opens at once
	if w.available(time.Now()) {
		t.Fatal("half-open failure did not re-open")
	}
	up.Close()
	rt.CheckHealth(context.Background())
	if w.Healthy() {
		t.Fatal("dead worker still healthy")
	}
}

// TestPoliciesOwnRouter: the policies called directly, as a router of one's
// own would (the Router never passes an empty list), return nil for no
// candidates and skip nil entries instead of panicking (they used to panic:
// IntN(0), a division by zero, c[0] of an empty slice); a zero CacheAware
// works.
func TestPoliciesOwnRouter(t *testing.T) {
	a, b := &Worker{URL: "a"}, &Worker{URL: "b"}
	pols := map[string]Policy{"zero CacheAware": &CacheAware{}}
	for _, name := range []string{"random", "round_robin", "power_of_two", "cache_aware"} {
		p, err := NewPolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		pols[name] = p
	}
	cases := []struct {
		name  string
		cands []*Worker
		want  []*Worker // allowed answers; none: nil
	}{
		{"nil list", nil, nil},
		{"empty list", []*Worker{}, nil},
		{"only nil", []*Worker{nil, nil}, nil},
		{"one", []*Worker{a}, []*Worker{a}},
		{"nil first", []*Worker{nil, b}, []*Worker{b}},
		{"nil between", []*Worker{a, nil, b}, []*Worker{a, b}},
	}
	for name, p := range pols {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				for range 20 {
					got := p.Pick(tc.cands, "a key longer than one sixteen-byte edge")
					if len(tc.want) == 0 && got != nil || len(tc.want) > 0 && !slices.Contains(tc.want, got) {
						t.Fatalf("Pick = %v, want one of %v", got, tc.want)
					}
				}
			})
		}
	}
}

// pickerFunc is a Policy from a function.
type pickerFunc func([]*Worker, string) *Worker

func (f pickerFunc) Pick(c []*Worker, key string) *Worker { return f(c, key) }

// TestRouterPicker: RouterConfig.Picker, a Policy of the caller's, picks
// every worker in both modes (the exported Policy interface had no way into
// a Router: only NewPolicy's names); a Picker answering nil or a worker that
// was not offered gives 503, not a panic or a request to it.
func TestRouterPicker(t *testing.T) {
	ok := func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":1}}`)
	}
	var r1, r2, pr, dr recorder
	w1, w2 := fakeServer(t, &r1, ok), fakeServer(t, &r2, ok)
	p, d := fakeServer(t, &pr, ok), fakeServer(t, &dr, ok)
	var seen sync.Map // role -> true
	last := func(c []*Worker, _ string) *Worker {
		for _, w := range c {
			seen.Store(w.Role, true)
		}
		return c[len(c)-1]
	}
	stranger := &Worker{URL: w1.URL, Role: "regular"}
	cases := []struct {
		name   string
		cfg    RouterConfig
		picker pickerFunc
		status int
		check  func() bool
	}{
		{"regular: the last worker", RouterConfig{Workers: []string{w1.URL, w2.URL}, Policy: "round_robin"}, last, 200,
			func() bool { return r1.calls.Load() == 0 && r2.calls.Load() == 3 }},
		{"PD: both roles", RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: p.URL, BootstrapPort: 1}}, Decode: []string{d.URL}}, last, 200,
			func() bool {
				_, pseen := seen.Load("prefill")
				_, dseen := seen.Load("decode")
				return pseen && dseen && dr.calls.Load() == 3
			}},
		{"nil answer", RouterConfig{Workers: []string{w1.URL}}, func([]*Worker, string) *Worker { return nil }, 503, nil},
		{"a worker not offered", RouterConfig{Workers: []string{w1.URL}}, func([]*Worker, string) *Worker { return stranger }, 503,
			func() bool { return r1.calls.Load() == 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Picker = tc.picker
			url := routerFor(t, tc.cfg)
			for range 3 {
				resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.status)
				}
			}
			if tc.check != nil && !tc.check() {
				t.Fatal("the Picker's choice was not followed")
			}
		})
	}
}
