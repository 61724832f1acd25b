package disagg

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// first is a Picker that takes the first worker offered (the untried ones
// in configuration order), so a test knows which worker an attempt uses.
var first = pickerFunc(func(c []*Worker, _ string) *Worker { return c[0] })

// dieAfter answers 200 with content type ct and body part, then drops the
// connection (a worker killed while it answers).
func dieAfter(ct, part string) func(http.ResponseWriter, map[string]json.RawMessage) {
	return func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, part)
		w.(http.Flusher).Flush()
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}
}

func answer(ct, body string) func(http.ResponseWriter, map[string]json.RawMessage) {
	return func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", ct)
		io.WriteString(w, body)
	}
}

// openAIError reports whether b is an OpenAI error object with a message.
func openAIError(b []byte) bool {
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" && e.Error.Type != ""
}

const okJSON = `{"id":"ok","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

const okSSE = "data: {\"id\":\"ok\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fine\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// TestRouterWorkerDiesBeforeFirstByte: a worker that dies while it answers,
// before the router has sent the client anything, is retried on the next
// one, and its breaker counts the failure. A non-streamed answer cut short
// (200 and part of its JSON) used to reach the client as an empty 200 in PD
// mode (and as the truncated JSON, status 200, in regular mode); an event
// stream that died after its headers as an empty 200 stream.
func TestRouterWorkerDiesBeforeFirstByte(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		bad              func(http.ResponseWriter, map[string]json.RawMessage)
		good             func(http.ResponseWriter, map[string]json.RawMessage)
	}{
		{"json", `{"messages":[]}`, okJSON, dieAfter("application/json", `{"id":"cut","choi`), answer("application/json", okJSON)},
		{"sse", `{"messages":[],"stream":true}`, okSSE, dieAfter("text/event-stream", ""), answer("text/event-stream", okSSE)},
	} {
		for _, pd := range []bool{false, true} {
			name := tc.name + "/regular"
			if pd {
				name = tc.name + "/pd"
			}
			t.Run(name, func(t *testing.T) {
				var br, gr, pr recorder
				bad, good := fakeServer(t, &br, tc.bad), fakeServer(t, &gr, tc.good)
				cfg := RouterConfig{Workers: []string{bad.URL, good.URL}, Picker: first, BreakerFailures: 1}
				if pd {
					p := fakeServer(t, &pr, answer("application/json", `{"choices":[],"usage":{"prompt_tokens":1}}`))
					cfg = RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: p.URL, BootstrapPort: 1}}, Decode: []string{bad.URL, good.URL},
						Picker: first, BreakerFailures: 1}
				}
				url := routerFor(t, cfg)
				resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || strings.TrimSpace(string(b)) != strings.TrimSpace(tc.want) {
					t.Fatalf("%d %q (%v), want 200 %q", resp.StatusCode, b, err, tc.want)
				}
				if br.calls.Load() != 1 || gr.calls.Load() != 1 {
					t.Fatalf("calls: dying worker %d, good one %d", br.calls.Load(), gr.calls.Load())
				}
				if resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(tc.body)); err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if br.calls.Load() != 1 {
					t.Fatal("the dying worker's breaker did not open")
				}
			})
		}
	}
}

// TestRouterMidStreamCut: a stream that breaks after the client got part
// of it is not retried (no event twice, nothing from another worker) and
// ends with an OpenAI error event, as the servers end a stream that fails
// while it generates: the client used to see a clean end of stream,
// without [DONE] or any error, which OpenAI's clients take for a complete
// answer.
func TestRouterMidStreamCut(t *testing.T) {
	for _, part := range []string{"data: {\"id\":\"a\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n", "data: {\"id\":\"a\",\"mo"} {
		var br, gr recorder
		bad, good := fakeServer(t, &br, dieAfter("text/event-stream", part)), fakeServer(t, &gr, answer("text/event-stream", okSSE))
		url := routerFor(t, RouterConfig{Workers: []string{bad.URL, good.URL}, Picker: first})
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := string(b)
		if !strings.HasPrefix(s, part) || gr.calls.Load() != 0 {
			t.Fatalf("cut stream %q relayed as %q; other worker called %d times", part, s, gr.calls.Load())
		}
		rest := s[len(part):]
		if !strings.HasSuffix(part, "\n\n") && !strings.HasPrefix(rest, "\n\n") {
			t.Fatalf("the cut event is not closed before the error event: %q", s)
		}
		events := strings.Split(strings.TrimSuffix(strings.TrimPrefix(rest, "\n\n"), "\n\n"), "\n\n")
		if len(events) != 2 || events[1] != "data: [DONE]" {
			t.Fatalf("after the cut: %q, want an error event and [DONE]", s[len(part):])
		}
		ev, ok := strings.CutPrefix(events[0], "data: ")
		if !ok || !openAIError([]byte(ev)) {
			t.Fatalf("after the cut: %q, want an OpenAI error event", events[0])
		}
	}
}

// TestRouterUpstreamErrorShape: a worker's 5xx whose body is not an OpenAI
// error object (a proxy's HTML page, plain text, nothing) reaches the
// client as one, with the worker's status: it used to be relayed as it
// was, labelled application/json.
func TestRouterUpstreamErrorShape(t *testing.T) {
	for _, tc := range []struct {
		status   int
		ct, body string
	}{
		{http.StatusBadGateway, "text/html", "<html><body>502 Bad Gateway</body></html>"},
		{http.StatusServiceUnavailable, "text/plain", "upstream connect error"},
		{http.StatusInternalServerError, "", ""},
		{http.StatusGatewayTimeout, "application/json", `{"detail":"timeout"}`},
	} {
		var rec recorder
		w := fakeServer(t, &rec, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
			if tc.ct != "" {
				w.Header().Set("Content-Type", tc.ct)
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		})
		for _, cfg := range []RouterConfig{{Workers: []string{w.URL}}, {PD: true, Prefill: []PrefillWorker{{URL: w.URL, BootstrapPort: 1}}, Decode: []string{w.URL}}} {
			url := routerFor(t, cfg)
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !openAIError(b) || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("PD %v: worker's %d %q reached the client as %d %q (%s)", cfg.PD, tc.status, tc.body, resp.StatusCode, b, resp.Header.Get("Content-Type"))
			}
		}
	}
}

// TestRouterBlamesFailingDecode: a decode server that fails at once (a
// 5xx without touching the room) is the one its breaker counts, not the
// prefill server whose request the router cancelled because of it. The
// cancelled prefill leg used to count as "the prefill side failed too":
// the prefill server's breaker opened and, with one prefill server, every
// request got 503 for BreakerCooldown, the healthy decode server unused.
func TestRouterBlamesFailingDecode(t *testing.T) {
	var pr, br, gr recorder
	// A prefill server in concurrent mode answers once the decode side has
	// fetched the room: here, after 50 ms, unless the router gives up first.
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			b, _ := io.ReadAll(r.Body) // then a closed connection cancels r's context
			pr.add(b)
			select {
			case <-r.Context().Done():
			case <-time.After(50 * time.Millisecond):
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[],"usage":{"prompt_tokens":1}}`)
			}
		}
	}))
	t.Cleanup(p.Close)
	bad := fakeServer(t, &br, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		writeError(w, http.StatusInternalServerError, "internal_error", "", "decode engine broken")
	})
	good := fakeServer(t, &gr, answer("application/json", okJSON))
	url := routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: p.URL, BootstrapPort: 1}}, Decode: []string{bad.URL, good.URL},
		Picker: first, BreakerFailures: 1})
	for i := range 3 {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s (prefill calls %d, failing decode %d, good decode %d)", i, resp.StatusCode, b,
				pr.calls.Load(), br.calls.Load(), gr.calls.Load())
		}
	}
	if br.calls.Load() != 1 {
		t.Fatalf("the failing decode server got %d requests, want 1 (its breaker open)", br.calls.Load())
	}
}

// TestRouterClientCancelNotAFailure: in regular mode too, a client that
// hangs up while a worker works on its request does not count against the
// worker's circuit breaker (with BreakerFailures 1, one cancellation used
// to open it: the next request got 503).
func TestRouterClientCancelNotAFailure(t *testing.T) {
	var calls atomic.Int64
	started := make(chan struct{}, 1)
	w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okJSON)
	}))
	t.Cleanup(w.Close)
	url := routerFor(t, RouterConfig{Workers: []string{w.URL}, BreakerFailures: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(`{"messages":[]}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	<-done
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a cancelled request: %d %s", resp.StatusCode, b)
	}
}

// TestRouterRoleSwap: an operator who swaps --prefill and --decode (or
// points both at one role) gets workers reported unhealthy by the health
// check at once (not after HealthFailures checks: it will not pass by
// itself), with a reason naming the role the server says it has, and a 503
// at once. Requests used to go through: the decode leg on the prefill
// server waited for a fetch that never came, until its lease (30 s by
// default), three attempts in a row.
func TestRouterRoleSwap(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{}, DecodeConfig{FetchTimeout: 2 * time.Second})
	rt, err := NewRouter(RouterConfig{PD: true, HealthInterval: time.Hour,
		Prefill: []PrefillWorker{{URL: pd.dURL}}, Decode: []string{pd.pURL}})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { rs.Close(); rt.Close() })
	for _, w := range rt.Workers() {
		w.mu.Lock()
		healthy, reason := w.healthy, w.reason
		w.mu.Unlock()
		if healthy || !strings.Contains(reason, "role") {
			t.Errorf("%s worker %s: healthy %v, reason %q; want unhealthy, the reason naming the role", w.Role, w.URL, healthy, reason)
		}
	}
	resp, out := post(t, context.Background(), rs.URL, q391)
	if resp.StatusCode != http.StatusServiceUnavailable || !openAIError([]byte(out)) {
		t.Fatalf("request through swapped roles: %d %s", resp.StatusCode, out)
	}
}

// TestNewRouterRefusesMisconfig: configurations that could only fail
// request by request are refused by NewRouter with an error wrapping
// dsv4.ErrInvalidParams that names the setting: regular workers given in
// PD mode (they were ignored) or prefill/decode servers in regular mode, a
// worker URL that is not http(s) (every request failed "unsupported
// protocol scheme"), a bootstrap port outside 0..65535.
func TestNewRouterRefusesMisconfig(t *testing.T) {
	p := []PrefillWorker{{URL: "http://127.0.0.1:1"}}
	d := []string{"http://127.0.0.1:2"}
	for _, tc := range []struct {
		cfg  RouterConfig
		want string
	}{
		{RouterConfig{PD: true, Prefill: p, Decode: d, Workers: []string{"http://127.0.0.1:3"}}, "Workers"},
		{RouterConfig{Workers: []string{"http://127.0.0.1:3"}, Decode: d}, "Decode"},
		{RouterConfig{Workers: []string{"http://127.0.0.1:3"}, Prefill: p}, "Prefill"},
		{RouterConfig{Workers: []string{"ftp://127.0.0.1:3"}}, "ftp"},
		{RouterConfig{PD: true, Prefill: p, Decode: []string{"127.0.0.1:2"}}, "127.0.0.1:2"},
		{RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: "http://127.0.0.1:1", BootstrapPort: 70000}}, Decode: d}, "70000"},
		{RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: "http://127.0.0.1:1", BootstrapPort: -1}}, Decode: d}, "-1"},
	} {
		tc.cfg.HealthInterval = -1
		rt, err := NewRouter(tc.cfg)
		if err == nil {
			rt.Close()
		}
		if !errors.Is(err, dsv4.ErrInvalidParams) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an ErrInvalidParams naming %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRouterNoGoroutineLeak: requests that fail every way the tests above
// make them fail (a decode server dying mid-answer, a stream cut, a decode
// server failing while the prefill leg waits, a client leaving mid-stream)
// leave no goroutine behind in the router once they are answered.
func TestRouterNoGoroutineLeak(t *testing.T) {
	var pr, ar, br, cr recorder
	prefillWait := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			b, _ := io.ReadAll(r.Body)
			pr.add(b)
			<-r.Context().Done()
		}
	}))
	t.Cleanup(prefillWait.Close)
	cutJSON := fakeServer(t, &ar, dieAfter("application/json", `{"id":"cut"`))
	cutSSE := fakeServer(t, &br, dieAfter("text/event-stream", "data: {\"id\":\"a\"}\n\n"))
	fail := fakeServer(t, &cr, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		writeError(w, http.StatusInternalServerError, "internal_error", "", "broken")
	})
	// A decode server that streams one event, then generates until its
	// client (the router) goes away.
	slowSSE := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"s\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slowSSE.Close)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	newRouter := func(decode ...string) *httptest.Server {
		rt, err := NewRouter(RouterConfig{PD: true, HealthInterval: -1, Client: client, BreakerFailures: 1000,
			Prefill: []PrefillWorker{{URL: prefillWait.URL, BootstrapPort: 1}}, Decode: decode})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(rt.Handler())
		t.Cleanup(func() { s.Close(); rt.Close() })
		return s
	}
	routers := []*httptest.Server{newRouter(cutJSON.URL), newRouter(cutSSE.URL), newRouter(fail.URL), newRouter(slowSSE.URL)}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	before := runtime.NumGoroutine()
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		for i, rs := range routers {
			body := `{"messages":[],"stream":true}`
			if i == 0 || i == 2 {
				body = `{"messages":[]}`
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/chat/completions", strings.NewReader(body))
			resp, err := cl.Do(req)
			if err == nil {
				if i == 3 { // leave after the first event
					bufio.NewReader(resp.Body).ReadString('\n')
				} else {
					io.ReadAll(resp.Body)
				}
				resp.Body.Close()
			}
			cancel()
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRouterMismatchBlamesPrefill: a decode server that refuses the
// transferred state as made from another prompt or sampling parameters
// (ErrMismatch) answers 502 transfer_mismatch (a 500 without a code
// before), and the Router counts it against the prefill server, which
// made the state, not the decode server that found it out (it did
// before); the retry takes a new pair, both servers of the disagreeing
// one excluded where others exist. Both coordination modes.
func TestRouterMismatchBlamesPrefill(t *testing.T) {
	e := apiError(fmt.Errorf("%w: prompt of 3 tokens from prefill, 4 here", ErrMismatch))
	if e.Status != http.StatusBadGateway || e.Code != "transfer_mismatch" || e.Type != "internal_error" {
		t.Fatalf("ErrMismatch: %d %s %s, want 502 internal_error transfer_mismatch", e.Status, e.Type, e.Code)
	}
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequential=%v", seq), func(t *testing.T) {
			var p1r, p2r, d1r, d2r recorder
			prefill := func(rec *recorder) *httptest.Server {
				return fakeServer(t, rec, answer("application/json",
					`{"choices":[],"usage":{"prompt_tokens":1},"kv_transfer_params":{"bootstrap_host":"127.0.0.1","bootstrap_port":1,"bootstrap_room":7}}`))
			}
			p1, p2 := prefill(&p1r), prefill(&p2r)
			d1 := fakeServer(t, &d1r, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
				writeErr(w, fmt.Errorf("%w: sampling parameters {} from prefill, {\"top_k\":5} here", ErrMismatch))
			})
			d2 := fakeServer(t, &d2r, answer("application/json", okJSON))
			rt, err := NewRouter(RouterConfig{PD: true, Sequential: seq, HealthInterval: -1, Picker: first, BreakerFailures: 2,
				Prefill: []PrefillWorker{{URL: p1.URL, BootstrapPort: 1}, {URL: p2.URL, BootstrapPort: 1}},
				Decode:  []string{d1.URL, d2.URL}})
			if err != nil {
				t.Fatal(err)
			}
			s := httptest.NewServer(rt.Handler())
			t.Cleanup(func() { s.Close(); rt.Close() })
			if st, code := chatStatus(context.Background(), s.URL); st != 200 {
				t.Fatalf("status %d %s", st, code)
			}
			chats := func(r *recorder) int64 { // not the router's POST /abort_request
				r.mu.Lock()
				defer r.mu.Unlock()
				n := int64(0)
				for _, b := range r.bodies {
					if strings.Contains(b, `"messages"`) {
						n++
					}
				}
				return n
			}
			if c := [4]int64{chats(&p1r), chats(&d1r), chats(&p2r), chats(&d2r)}; c != [4]int64{1, 1, 1, 1} {
				t.Fatalf("calls p1 d1 p2 d2 = %v, want one each (the retry on the other pair)", c)
			}
			ws := rt.Workers()
			fails := func(url string) int {
				for _, w := range ws {
					if w.URL == url {
						w.mu.Lock()
						defer w.mu.Unlock()
						return w.consecFails
					}
				}
				return -1
			}
			if fp, fd := fails(p1.URL), fails(d1.URL); fp != 1 || fd != 0 {
				t.Fatalf("consecutive failures: prefill %d, decode %d; want 1 and 0 (the prefill server blamed)", fp, fd)
			}
		})
	}
}
