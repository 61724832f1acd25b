package disagg

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// longChat is a request whose prompt is far over a 32-token context.
var longChat = `{"messages":[{"role":"user","content":"` + strings.Repeat("hello world ", 60) + `"}],"max_tokens":4}`

// withBootstrap adds bootstrap fields (concurrent mode) to a request body.
func withBootstrap(body string, port int, room uint64) string {
	return strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":%d}`, port, room)
}

// errCode returns the OpenAI error object's code of an error answer.
func errCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error object: %v: %s", err, body)
	}
	return e.Error.Code
}

// fast bounds the answers that must not wait for a fetch timeout (30 s).
const fast = 10 * time.Second

// TestPDRejectsInvalidAtOnce (BREAKER F16): a request the prefill side
// refuses (400 context_length_exceeded with a tiny context length) fails its
// room at once, so the decode side answers the same 400 immediately, whether
// it asked for the room before or after the prefill side refused it, over
// both transports; and a decode server validates the request itself before
// waiting for a room (prompt_logprobs, which no PD pair serves, included).
func TestPDRejectsInvalidAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   func() Transport
	}{{"grpc", func() Transport { return &GRPCTransport{} }}, {"inprocess", func() Transport { return &InProcess{} }}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.tr()
			pd := startPDWith(t, PrefillConfig{Transport: tr, ContextLength: 32},
				DecodeConfig{Transport: tr, FetchTimeout: 30 * time.Second}) // decode: the model's context
			ctx := context.Background()

			t.Run("prefill_first", func(t *testing.T) {
				body := withBootstrap(longChat, pd.bootPort, 1001)
				resp, b := post(t, ctx, pd.pURL, body)
				if resp.StatusCode != 400 || errCode(t, b) != "context_length_exceeded" {
					t.Fatalf("prefill: %d %s", resp.StatusCode, b)
				}
				t0 := time.Now()
				resp, b = post(t, ctx, pd.dURL, body)
				if resp.StatusCode != 400 || errCode(t, b) != "context_length_exceeded" || time.Since(t0) > fast {
					t.Fatalf("decode: %d after %v: %s", resp.StatusCode, time.Since(t0), b)
				}
			})
			t.Run("decode_waiting", func(t *testing.T) {
				body := withBootstrap(longChat, pd.bootPort, 1002)
				type res struct {
					st   int
					body string
				}
				dc := make(chan res, 1)
				go func() {
					req, _ := http.NewRequest("POST", pd.dURL+"/v1/chat/completions", strings.NewReader(body))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						dc <- res{0, err.Error()}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					dc <- res{resp.StatusCode, string(b)}
				}()
				for deadline := time.Now().Add(fast); pd.p.Rooms().Counts()[RoomBootstrapping] == 0; {
					if time.Now().After(deadline) {
						t.Fatal("decode side never asked for the room")
					}
					time.Sleep(5 * time.Millisecond)
				}
				t0 := time.Now()
				if resp, b := post(t, ctx, pd.pURL, body); resp.StatusCode != 400 {
					t.Fatalf("prefill: %d %s", resp.StatusCode, b)
				}
				select {
				case r := <-dc:
					if r.st != 400 || errCode(t, r.body) != "context_length_exceeded" {
						t.Fatalf("decode: %d %s", r.st, r.body)
					}
				case <-time.After(fast):
					t.Fatalf("decode still waiting %v after the prefill side refused the request", time.Since(t0))
				}
				if n := pd.p.Rooms().Live(); n != 0 {
					t.Fatalf("%d live rooms left", n)
				}
			})
		})
	}

	t.Run("decode_validates_first", func(t *testing.T) {
		pd := startPDWith(t, PrefillConfig{}, DecodeConfig{ContextLength: 32, FetchTimeout: 30 * time.Second})
		ctx := context.Background()
		for i, tc := range []struct{ body, code string }{
			{longChat, "context_length_exceeded"},
			{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":30}`, "context_length_exceeded"},
			{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, "context_length_exceeded"}, // over the context alone: also vLLM's context message
			{`{"messages":[{"role":"user","content":"hi"}],"temperature":-1}`, ""},
			// prompt_logprobs: the decode side never prefills the prompt
			{`{"messages":[{"role":"user","content":"hi"}],"prompt_logprobs":1}`, ""},
		} {
			t0 := time.Now()
			resp, b := post(t, ctx, pd.dURL, withBootstrap(tc.body, pd.bootPort, uint64(2000+i)))
			if resp.StatusCode != 400 || errCode(t, b) != tc.code || time.Since(t0) > fast {
				t.Fatalf("case %d: %d after %v: %s", i, resp.StatusCode, time.Since(t0), b)
			}
		}
		// and the prefill side refuses prompt_logprobs too, naming it
		resp, b := post(t, ctx, pd.pURL, withBootstrap(`{"messages":[{"role":"user","content":"hi"}],"prompt_logprobs":0}`, pd.bootPort, 2100))
		if resp.StatusCode != 400 || !strings.Contains(b, `"param":"prompt_logprobs"`) {
			t.Fatalf("prefill prompt_logprobs: %d %s", resp.StatusCode, b)
		}
	})
}

// TestRouterPrefillRejection (BREAKER F16): through a PD router, a request
// the prefill server refuses gets the prefill server's 400 at once, is not
// retried and does not count against any worker: with a breaker that opens
// after one failure, the next valid request still succeeds.
func TestRouterPrefillRejection(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{ContextLength: 32}, DecodeConfig{FetchTimeout: 30 * time.Second})
	rt, err := NewRouter(RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}},
		Decode: []string{pd.dURL}, HealthInterval: -1, BreakerFailures: 1, BreakerCooldown: time.Minute, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { s.Close(); rt.Close() })
	ctx := context.Background()
	for range 3 {
		t0 := time.Now()
		resp, b := post(t, ctx, s.URL, longChat)
		if resp.StatusCode != 400 || errCode(t, b) != "context_length_exceeded" || time.Since(t0) > fast {
			t.Fatalf("router: %d after %v: %s", resp.StatusCode, time.Since(t0), b)
		}
	}
	resp, b := post(t, ctx, s.URL, `{"messages":[{"role":"user","content":"What is 17*23?"}],"max_tokens":4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("valid request after rejections: %d %s", resp.StatusCode, b)
	}
	mr, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	for _, want := range []string{"dsv4_router_retries_total 0", "dsv4_router_breaker_open_total 0",
		`dsv4_router_requests_total{mode="pd",outcome="client_error"} 3`} {
		if !strings.Contains(string(mb), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, w := range rt.Workers() {
		if !w.available(time.Now()) {
			t.Errorf("worker %s %s unavailable after client errors", w.Role, w.URL)
		}
	}
	if n := pd.p.Rooms().Live(); n != 0 {
		t.Errorf("%d live rooms left", n)
	}
}
