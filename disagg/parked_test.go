package disagg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/prometheus/client_golang/prometheus"
)

// gaugeValue reads the gauge name (no labels) from reg; -1 when absent.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// parkedIdle: the prefill server holds no room and no state, and its
// gauges say so.
func parkedIdle(t *testing.T, p *PrefillServer) bool {
	n, b := p.Rooms().Parked()
	return n == 0 && b == 0 && p.Rooms().Live() == 0 &&
		gaugeValue(t, p.reg, "dsv4_disagg_prefill_parked_states") == 0 &&
		gaugeValue(t, p.reg, "dsv4_disagg_prefill_parked_bytes") == 0 &&
		gauge(p.roomGauge.WithLabelValues("ready")) == 0
}

// TestRoomsParkedLimits: Rooms.MaxParked and MaxParkedBytes refuse a new
// request (Admit) and a state that would go over (Put: the room fails,
// and the decode side waiting for it learns why at once) with
// ErrPoolFull; a state larger than MaxParkedBytes is accepted when none
// is held; the counts return to 0 when states are fetched, failed or
// expire.
func TestRoomsParkedLimits(t *testing.T) {
	hand := func(n int) *Handoff { return &Handoff{State: &dsv4.SequenceState{}, Logits: make([]float32, n)} }
	rs := NewRooms(Identity{})
	rs.MaxParked, rs.MaxParkedBytes, rs.Lease = 3, 100, 100*time.Millisecond
	put := func(id uint64, h *Handoff) error {
		if err := rs.Open(id); err != nil {
			t.Fatal(err)
		}
		return rs.Put(id, h)
	}
	if err := put(1, hand(40)); err != nil { // 160 bytes: over the limit, but alone
		t.Fatalf("a lone state over MaxParkedBytes: %v", err)
	}
	if err := rs.Admit(); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("Admit with 160 of 100 bytes parked: %v", err)
	}
	if err := put(2, hand(1)); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("Put over MaxParkedBytes: %v", err)
	}
	// the refused room failed: a decode side asking for it learns why
	if _, _, err := rs.Take(context.Background(), 2); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Take of the refused room: %v", err)
	}
	h, done, err := rs.Take(context.Background(), 1)
	if err != nil || h == nil {
		t.Fatal(err)
	}
	if n, b := rs.Parked(); n != 1 || b != 160 {
		t.Fatalf("while sending: %d states, %d bytes; want 1, 160", n, b)
	}
	done(nil)
	if n, b := rs.Parked(); n != 0 || b != 0 {
		t.Fatalf("after the transfer: %d states, %d bytes", n, b)
	}
	// by count
	for id := uint64(10); id < 13; id++ {
		if err := put(id, hand(5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Admit(); !errors.Is(err, ErrPoolFull) || !strings.Contains(err.Error(), "3 states") {
		t.Fatalf("Admit with 3 of 3 states: %v", err)
	}
	rs.Fail(10, errors.New("released"))
	if err := rs.Admit(); err != nil {
		t.Fatalf("Admit after one was released: %v", err)
	}
	time.Sleep(150 * time.Millisecond) // the others' lease
	if n, b := rs.Parked(); n != 0 || b != 0 || rs.Live() != 0 {
		t.Fatalf("after the lease: %d states, %d bytes, %d rooms", n, b, rs.Live())
	}
}

// TestPrefillPoolFull: a prefill server holding PrefillConfig.
// MaxParkedStates states refuses the next request with 503 kv_pool_full
// (in concurrent mode its decode side fails at once instead of waiting for
// the room) until one is fetched or released by POST /abort_request; the
// parked gauges count the states and return to 0. Before, sequential-mode
// states nobody fetched piled up without bound until their 30 s lease.
func TestPrefillPoolFull(t *testing.T) {
	if _, err := NewPrefillServer(PrefillConfig{Model: tinyModel(t), MaxParkedBytes: -1}); !errors.Is(err, dsv4.ErrInvalidParams) {
		t.Fatalf("negative MaxParkedBytes: %v", err)
	}
	pd := startPDWith(t, PrefillConfig{MaxParkedStates: 2, Lease: 30 * time.Second},
		DecodeConfig{FetchTimeout: 20 * time.Second})
	ctx := context.Background()
	var rooms []uint64
	for range 2 { // sequential prefills whose descriptors nobody uses
		resp, out := post(t, ctx, pd.pURL, q391)
		var desc struct {
			KV Bootstrap `json:"kv_transfer_params"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &desc) != nil {
			t.Fatalf("sequential prefill: %d %s", resp.StatusCode, out)
		}
		rooms = append(rooms, desc.KV.Room)
	}
	if n := gaugeValue(t, pd.p.reg, "dsv4_disagg_prefill_parked_states"); n != 2 {
		t.Fatalf("parked_states gauge %v, want 2", n)
	}
	if b := gaugeValue(t, pd.p.reg, "dsv4_disagg_prefill_parked_bytes"); b <= 0 {
		t.Fatalf("parked_bytes gauge %v", b)
	}
	full := func(resp *http.Response, out string) {
		t.Helper()
		var e struct {
			Error struct {
				Type, Code, Message string
			}
		}
		if resp.StatusCode != 503 || json.Unmarshal([]byte(out), &e) != nil || e.Error.Code != "kv_pool_full" ||
			e.Error.Type != "service_unavailable" || !strings.Contains(e.Error.Message, "limit 2") {
			t.Fatalf("full prefill server: %d %s, want 503 service_unavailable kv_pool_full", resp.StatusCode, out)
		}
	}
	resp, out := post(t, ctx, pd.pURL, q391)
	full(resp, out)
	// Concurrent mode: the decode server waiting for the refused room
	// answers at once (its BootstrapTimeout is 30 s).
	body := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootPort, "bootstrap_room": 4242})
	dres := make(chan string, 1)
	t0 := time.Now()
	go func() {
		req, _ := http.NewRequest("POST", pd.dURL+"/v1/chat/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			dres <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		dres <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	resp, out = post(t, ctx, pd.pURL, body)
	full(resp, out)
	if s := <-dres; !strings.HasPrefix(s, "502 ") || !strings.Contains(s, "transfer_aborted") || time.Since(t0) > 10*time.Second {
		t.Fatalf("decode side of a refused room: %s after %v", s, time.Since(t0))
	}

	// /abort_request releases a parked state: room for one more.
	abort := func(body string) (int, string) {
		t.Helper()
		resp, out := send(t, ctx, "POST", pd.pURL+"/abort_request", body)
		return resp.StatusCode, out
	}
	if st, out := abort(fmt.Sprintf(`{"bootstrap_room":%d}`, rooms[0])); st != 200 || !strings.Contains(out, `"aborted":true`) {
		t.Fatalf("abort_request: %d %s", st, out)
	}
	if st, out := abort(fmt.Sprintf(`{"bootstrap_room":%d}`, rooms[0])); st != 200 || !strings.Contains(out, `"aborted":false`) {
		t.Fatalf("abort_request again: %d %s", st, out)
	}
	if st, out := abort(`{"room":1}`); st != 400 || !strings.Contains(out, "bootstrap_room") {
		t.Fatalf("abort_request without a room: %d %s", st, out)
	}
	if resp, out := post(t, ctx, pd.pURL, q391); resp.StatusCode != 200 {
		t.Fatalf("after a release: %d %s", resp.StatusCode, out)
	} else {
		var desc struct {
			KV Bootstrap `json:"kv_transfer_params"`
		}
		json.Unmarshal([]byte(out), &desc)
		rooms = append(rooms, desc.KV.Room)
	}
	// A decode server fetching one frees its place too.
	_, dout := post(t, ctx, pd.dURL, withFields(q391, map[string]any{"kv_transfer_params": Bootstrap{Host: "127.0.0.1", Port: pd.bootPort, Room: rooms[1]}}))
	if got := parseChat(t, dout).summary(); got != "C:391|F:stop" {
		t.Fatalf("decode of a parked state: %s", dout)
	}
	abort(fmt.Sprintf(`{"bootstrap_room":%d}`, rooms[2]))
	waitFor(t, func() bool { return parkedIdle(t, pd.p) })
}

// TestRouterSequentialReleasesParked: in sequential mode the Router
// releases the state its prefill leg parked when the decode leg will not
// fetch it: the decode server unreachable, or the client gone between the
// legs. The prefill server's rooms and parked gauges return to 0 at once;
// before, each attempt's state stayed for its 30 s lease.
func TestRouterSequentialReleasesParked(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{Lease: 30 * time.Second, APIKey: "k"}, DecodeConfig{FetchTimeout: 20 * time.Second})
	newRouter := func(decode string) string {
		return routerFor(t, RouterConfig{PD: true, Sequential: true, WorkerAPIKey: "k",
			Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{decode}})
	}
	t.Run("decode unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		url := newRouter(dead.URL)
		if st, code := chatStatusBody(context.Background(), url, q391); st < 500 {
			t.Fatalf("decode unreachable: %d %s", st, code)
		}
		waitFor(t, func() bool { return parkedIdle(t, pd.p) })
	})
	t.Run("client gone between the legs", func(t *testing.T) {
		reached := make(chan struct{}, 1)
		hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/chat/completions" {
				return
			}
			io.Copy(io.Discard, r.Body) // then a closed connection cancels r's context
			reached <- struct{}{}
			<-r.Context().Done() // a decode server that has not fetched yet
		}))
		t.Cleanup(hold.Close)
		url := newRouter(hold.URL)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // a failing check leaves no request held
		done := make(chan struct{})
		go func() { chatStatusBody(ctx, url, q391); close(done) }()
		<-reached
		if n, _ := pd.p.Rooms().Parked(); n != 1 {
			t.Fatalf("%d states parked while the decode leg runs, want 1", n)
		}
		cancel()
		<-done
		waitFor(t, func() bool { return parkedIdle(t, pd.p) })
	})
	t.Run("pair works", func(t *testing.T) {
		url := newRouter(pd.dURL)
		if st, code := chatStatusBody(context.Background(), url, q391); st != 200 {
			t.Fatalf("%d %s", st, code)
		}
		waitFor(t, func() bool { return parkedIdle(t, pd.p) })
	})
}

// TestRouterPoolFullNotAFailure: a prefill server answering 503
// kv_pool_full is full, not failing: the Router takes another prefill
// server without counting it against the full one's breaker, in both
// coordination modes (in concurrent mode the decode server's 502
// transfer_aborted for the refused room is not blamed either).
func TestRouterPoolFullNotAFailure(t *testing.T) {
	for _, seq := range []bool{false, true} {
		t.Run(fmt.Sprintf("sequential=%v", seq), func(t *testing.T) {
			var fr, or, dr recorder
			full := fakeServer(t, &fr, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
				writeErr(w, fmt.Errorf("%w: 2 states parked for decode servers (limit 2)", ErrPoolFull))
			})
			ok := fakeServer(t, &or, answer("application/json",
				`{"choices":[],"usage":{"prompt_tokens":1},"kv_transfer_params":{"bootstrap_host":"127.0.0.1","bootstrap_port":2,"bootstrap_room":7}}`))
			d := fakeServer(t, &dr, func(w http.ResponseWriter, m map[string]json.RawMessage) {
				if string(m["bootstrap_port"]) == "1" { // the full server's room
					writeErr(w, fmt.Errorf("%w: %w", ErrAborted, ErrPoolFull))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, okJSON)
			})
			rt, err := NewRouter(RouterConfig{PD: true, Sequential: seq, HealthInterval: -1, Picker: first, BreakerFailures: 1,
				Prefill: []PrefillWorker{{URL: full.URL, BootstrapPort: 1}, {URL: ok.URL, BootstrapPort: 2}},
				Decode:  []string{d.URL}})
			if err != nil {
				t.Fatal(err)
			}
			s := httptest.NewServer(rt.Handler())
			t.Cleanup(func() { s.Close(); rt.Close() })
			for i := range 2 {
				if st, code := chatStatus(context.Background(), s.URL); st != 200 {
					t.Fatalf("request %d: %d %s", i, st, code)
				}
			}
			if fr.calls.Load() != 2 || or.calls.Load() != 2 {
				t.Fatalf("full prefill server got %d requests, the other %d; want 2 and 2 (its breaker closed)", fr.calls.Load(), or.calls.Load())
			}
		})
	}
	// With one prefill server, full: the client gets its 503 kv_pool_full.
	var fr, dr recorder
	full := fakeServer(t, &fr, func(w http.ResponseWriter, _ map[string]json.RawMessage) {
		writeErr(w, fmt.Errorf("%w: 2 states parked for decode servers (limit 2)", ErrPoolFull))
	})
	d := fakeServer(t, &dr, answer("application/json", okJSON))
	url := routerFor(t, RouterConfig{PD: true, Sequential: true, Prefill: []PrefillWorker{{URL: full.URL, BootstrapPort: 1}}, Decode: []string{d.URL}})
	if st, code := chatStatus(context.Background(), url); st != 503 || code != "kv_pool_full" {
		t.Fatalf("only a full prefill server: %d %s, want 503 kv_pool_full", st, code)
	}
}
