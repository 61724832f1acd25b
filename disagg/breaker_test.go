package disagg

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedWorker is a fake regular worker whose chat answers wait for gate
// (then 200, or 500 when fail is set) while hold is set, and answer at
// once otherwise (500 when fail is set). calls counts chat requests.
type gatedWorker struct {
	srv                *httptest.Server
	calls              atomic.Int64
	hold, fail         atomic.Bool
	mu                 sync.Mutex
	gate               chan struct{}
	arrived            chan struct{} // one value per held request
	cancelledWhileHeld atomic.Int64
}

func newGatedWorker(t *testing.T) *gatedWorker {
	g := &gatedWorker{gate: make(chan struct{}), arrived: make(chan struct{}, 64)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		io.Copy(io.Discard, r.Body)
		g.calls.Add(1)
		if g.hold.Load() {
			g.mu.Lock()
			gate := g.gate
			g.mu.Unlock()
			g.arrived <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
				g.cancelledWhileHeld.Add(1)
				return
			}
		}
		if g.fail.Load() {
			writeError(w, http.StatusInternalServerError, "internal_error", "boom", "worker failing")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okJSON)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// release lets the held requests answer and arms a new gate.
func (g *gatedWorker) release() {
	g.mu.Lock()
	close(g.gate)
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

// chatStatus posts a chat request to the router at url and returns the
// status (0 on a transport error) and the error code of an error answer.
func chatStatus(ctx context.Context, url string) (int, string) {
	return chatStatusBody(ctx, url, `{"messages":[]}`)
}

// chatStatusBody is chatStatus with a request body of the caller's.
func chatStatusBody(ctx context.Context, url, body string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// burst sends n chat requests at once and returns their statuses.
func burst(url string, n int) []int {
	out := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], _ = chatStatus(context.Background(), url)
		}()
	}
	wg.Wait()
	return out
}

func waitArrived(t *testing.T, g *gatedWorker) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the trial request never reached the worker")
	}
}

func countStatus(st []int, want int) int {
	n := 0
	for _, s := range st {
		if s == want {
			n++
		}
	}
	return n
}

// TestRouterHalfOpenOneTrial: after BreakerCooldown a worker's breaker is
// half-open and lets exactly one request through at a time; the others
// go to another worker, or get 503 when there is none. The trial's
// success closes the breaker, its failure re-opens it, and a trial whose
// client left is given back (the next request is the trial). Before, every
// request after the cooldown went to the recovering worker at once.
func TestRouterHalfOpenOneTrial(t *testing.T) {
	const cooldown = 80 * time.Millisecond
	const n = 8
	newRouter := func(t *testing.T, urls ...string) (*Router, string) {
		rt, err := NewRouter(RouterConfig{Workers: urls, HealthInterval: -1, BreakerFailures: 1,
			BreakerCooldown: cooldown, Picker: first})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(rt.Handler())
		t.Cleanup(func() { s.Close(); rt.Close() })
		return rt, s.URL
	}

	t.Run("alone", func(t *testing.T) {
		a := newGatedWorker(t)
		rt, url := newRouter(t, a.srv.URL)
		wk := rt.Workers()[0]
		a.fail.Store(true)
		if st, _ := chatStatus(context.Background(), url); st != 500 {
			t.Fatalf("failing worker: status %d", st)
		}
		if st, code := chatStatus(context.Background(), url); st != 503 || a.calls.Load() != 1 {
			t.Fatalf("breaker open: status %d %q, worker calls %d (want 503, 1)", st, code, a.calls.Load())
		}
		time.Sleep(cooldown + 20*time.Millisecond)

		// Half-open: one trial, held by the worker; the others get 503.
		a.fail.Store(false)
		a.hold.Store(true)
		trial := make(chan int, 1)
		go func() { st, _ := chatStatus(context.Background(), url); trial <- st }()
		waitArrived(t, a)
		if st := burst(url, n); countStatus(st, 503) != n {
			t.Fatalf("while the trial is out: statuses %v, want all 503", st)
		}
		if c := a.calls.Load(); c != 2 {
			t.Fatalf("worker got %d requests while half-open, want 1 (the trial)", c-1)
		}
		a.release()
		if st := <-trial; st != 200 {
			t.Fatalf("trial: status %d", st)
		}
		// Closed: everybody gets through at once.
		a.hold.Store(false)
		if st := burst(url, n); countStatus(st, 200) != n {
			t.Fatalf("after a successful trial: statuses %v, want all 200", st)
		}

		// A failing trial re-opens the breaker for another cooldown.
		a.fail.Store(true)
		chatStatus(context.Background(), url) // opens
		time.Sleep(cooldown + 20*time.Millisecond)
		before := a.calls.Load()
		if st := burst(url, n); countStatus(st, 500) != 1 || countStatus(st, 503) != n-1 {
			t.Fatalf("half-open, failing worker: statuses %v, want one 500 (the trial) and 503s", st)
		}
		if c := a.calls.Load() - before; c != 1 {
			t.Fatalf("worker got %d of a burst while half-open, want 1", c)
		}
		if wk.available(time.Now()) {
			t.Fatal("a failed trial did not re-open the breaker")
		}
		if st, _ := chatStatus(context.Background(), url); st != 503 || a.calls.Load()-before != 1 {
			t.Fatalf("re-opened: status %d, worker calls %d", st, a.calls.Load()-before)
		}

		// A trial whose client leaves is given back: the next request is
		// the trial.
		time.Sleep(cooldown + 20*time.Millisecond)
		a.fail.Store(false)
		a.hold.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { chatStatus(ctx, url); close(done) }()
		waitArrived(t, a)
		cancel()
		<-done
		deadline := time.Now().Add(5 * time.Second)
		for !wk.available(time.Now()) {
			if time.Now().After(deadline) {
				t.Fatal("the trial of a client that left was never given back")
			}
			time.Sleep(5 * time.Millisecond)
		}
		a.hold.Store(false)
		if st, _ := chatStatus(context.Background(), url); st != 200 {
			t.Fatalf("next trial: status %d", st)
		}
		if wk.blocked(time.Now()) || !wk.available(time.Now()) {
			t.Fatal("a successful trial did not close the breaker")
		}
	})

	t.Run("others elsewhere", func(t *testing.T) {
		a, b := newGatedWorker(t), newGatedWorker(t)
		rt, url := newRouter(t, a.srv.URL, b.srv.URL)
		rt.report(rt.Workers()[0], false) // a's breaker opens
		time.Sleep(cooldown + 20*time.Millisecond)
		a.hold.Store(true)
		done := make(chan []int, 1)
		go func() { done <- burst(url, n) }()
		waitArrived(t, a)
		// the other n-1 are answered by b while a holds its trial
		deadline := time.Now().Add(5 * time.Second)
		for b.calls.Load() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("b got %d requests, want %d", b.calls.Load(), n-1)
			}
			time.Sleep(5 * time.Millisecond)
		}
		a.release()
		if st := <-done; countStatus(st, 200) != n {
			t.Fatalf("statuses %v, want all 200", st)
		}
		if a.calls.Load() != 1 || b.calls.Load() != n-1 {
			t.Fatalf("a got %d, b %d; want 1 and %d", a.calls.Load(), b.calls.Load(), n-1)
		}
	})
}

// TestBreakerClaimConcurrent: many goroutines picking a half-open worker at
// once: exactly one gets it; giving the trial back lets exactly one more.
func TestBreakerClaimConcurrent(t *testing.T) {
	rt, err := NewRouter(RouterConfig{Workers: []string{"http://127.0.0.1:1"}, HealthInterval: -1, BreakerFailures: 1, BreakerCooldown: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	wk := rt.Workers()[0]
	rt.report(wk, false)
	time.Sleep(5 * time.Millisecond)
	for round := range 3 {
		var got atomic.Int64
		var trials sync.Map
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if w, trial := rt.pick(rt.polR, rt.regular, nil, "", nil); w != nil {
					got.Add(1)
					trials.Store(trial, true)
				}
			}()
		}
		wg.Wait()
		if got.Load() != 1 {
			t.Fatalf("round %d: %d picks of a half-open worker, want 1", round, got.Load())
		}
		trials.Range(func(k, _ any) bool { wk.endTrial(k.(uint64)); return true })
	}
	rt.report(wk, true)
	for range 5 {
		if w, trial := rt.pick(rt.polR, rt.regular, nil, "", nil); w == nil || trial != 0 {
			t.Fatalf("closed breaker: pick %v trial %d", w, trial)
		}
	}
}
