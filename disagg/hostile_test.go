package disagg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

// tamperSource serves a prefill server's rooms with every handoff changed
// by the function in f (if any) before it is sent: a prefill peer that has
// the right identity but sends a state that does not fit it (a bug, a bit
// flip before the CRC, a hostile peer).
type tamperSource struct {
	*Rooms
	f *atomic.Pointer[func(*Handoff)]
}

func (s tamperSource) Take(ctx context.Context, id uint64) (*Handoff, func(error), error) {
	h, done, err := s.Rooms.Take(ctx, id)
	if f := s.f.Load(); err == nil && f != nil {
		(*f)(h)
	}
	return h, done, err
}

// tampered is a prefill and a decode server whose bootstrap service is a
// tamperSource over the prefill server's rooms.
type tampered struct {
	pd   *pdPair
	port int // the tamperSource's bootstrap port
	f    *atomic.Pointer[func(*Handoff)]
}

// startTampered starts a tampered pair that moves states over tr.
func startTampered(t *testing.T, tr Transport) tampered {
	t.Helper()
	pd := startPDWith(t, PrefillConfig{Transport: tr}, DecodeConfig{Transport: tr, FetchTimeout: 5 * time.Second})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f := &atomic.Pointer[func(*Handoff)]{}
	go func() { defer close(done); tr.Serve(ctx, lis, tamperSource{pd.p.Rooms(), f}) }()
	t.Cleanup(func() { cancel(); <-done })
	return tampered{pd, lis.Addr().(*net.TCPAddr).Port, f}
}

// tamperedPairs starts a tampered pair per transport (gRPC, in-process).
func tamperedPairs(t *testing.T) []tampered {
	return []tampered{startTampered(t, &GRPCTransport{}), startTampered(t, &InProcess{})}
}

// pdAsk sends body to both servers of pd in concurrent mode (room, port)
// and returns the decode server's answer.
func pdAsk(t *testing.T, pd *pdPair, port int, room uint64, body string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body = withFields(body, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": room})
	pdone := make(chan struct{})
	go func() {
		defer close(pdone)
		req, _ := http.NewRequestWithContext(ctx, "POST", pd.pURL+"/v1/chat/completions", strings.NewReader(body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	resp, out := post(t, ctx, pd.dURL, body)
	<-pdone
	return resp, out
}

// TestDecodeRefusesLogitsOfWrongLength: a handoff whose logits are not one
// row of the vocabulary is refused (502 transfer_failed), never sampled
// from: short logits used to give a 200 whose first token was among the
// few ids present, longer ones a 500 after sampling an id past the
// vocabulary. The decode server checks the handoffs of any Transport
// (InProcess ones are not decoded): ErrMalformed.
func TestDecodeRefusesLogitsOfWrongLength(t *testing.T) {
	pairs := tamperedPairs(t) // 0: gRPC, 1: in-process
	room := uint64(100)
	for _, tc := range []struct {
		name string
		f    func(*Handoff)
		body string
	}{
		{"short", func(h *Handoff) { h.Logits = h.Logits[:3] }, q391},
		{"empty", func(h *Handoff) { h.Logits = nil }, withFields(q391, map[string]any{"temperature": 0.7, "seed": 1})},
		{"long", func(h *Handoff) { h.Logits = append(h.Logits, 1e9) }, q391},
	} {
		for i, tp := range pairs {
			t.Run(fmt.Sprintf("%s/%d", tc.name, i), func(t *testing.T) {
				pd := tp.pd
				tp.f.Store(&tc.f)
				room++
				resp, out := pdAsk(t, pd, tp.port, room, tc.body)
				if resp.StatusCode != http.StatusBadGateway || !strings.Contains(out, "transfer_failed") || !strings.Contains(out, "logits") {
					t.Fatalf("decode answered %d %s, want 502 transfer_failed", resp.StatusCode, out)
				}
				waitFor(t, func() bool {
					return pd.p.Rooms().Live() == 0 && pd.d.eng.Stats().LiveSequences == 0 && pd.d.back.nPend.Load() == 0
				})
			})
		}
	}
}

// stallListener accepts connections and never answers on them (a peer
// that hangs after TCP connect: a frozen process, a black-holing proxy).
type stallListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func stall(t *testing.T) *stallListener {
	t.Helper()
	l := &stallListener{Listener: listen(t)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		l.mu.Lock()
		for _, c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
	})
	return l
}

// noLeak fails t unless the goroutine count comes back to at most before
// within 2 s.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDecodeFetchTimeoutBoundsStalledPeer: DecodeConfig.FetchTimeout bounds
// the whole wait for a room's state, the connection and handshake
// included: a bootstrap port that accepts and never answers used to hold
// the request for the handshake's own 10 s. A peer that stalls after the
// handshake (every frame delayed for an hour) is given up on the same way.
// Either way the client gets 504 transfer_timeout and no goroutine stays.
func TestDecodeFetchTimeoutBoundsStalledPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	pd := startPDWith(t, PrefillConfig{Transport: &GRPCTransport{FrameDelay: time.Hour}},
		DecodeConfig{FetchTimeout: timeout})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	ask := func(port int, room uint64, withPrefill bool) (int, string, time.Duration) {
		body := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": room})
		pdone := make(chan struct{})
		go func() {
			defer close(pdone)
			if withPrefill {
				if resp, err := client.Post(pd.pURL+"/v1/chat/completions", "application/json", strings.NewReader(body)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
		t0 := time.Now()
		resp, err := client.Post(pd.dURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		el := time.Since(t0)
		<-pdone
		return resp.StatusCode, string(b), el
	}
	sl := stall(t)
	time.Sleep(10 * time.Millisecond) // its accept loop running
	before := runtime.NumGoroutine()
	st, out, el := ask(sl.Addr().(*net.TCPAddr).Port, 1, false)
	if st != http.StatusGatewayTimeout || !strings.Contains(out, "transfer_timeout") || el > timeout+2*time.Second {
		t.Fatalf("stalled handshake: %d %s after %v, want 504 transfer_timeout after about %v", st, out, el, timeout)
	}
	noLeak(t, before)
	st, out, el = ask(pd.bootPort, 2, true)
	if st != http.StatusGatewayTimeout || !strings.Contains(out, "transfer_timeout") || el > timeout+2*time.Second {
		t.Fatalf("stalled transfer: %d %s after %v, want 504 transfer_timeout", st, out, el)
	}
	waitFor(t, func() bool { return pd.p.Rooms().Live() == 0 && pd.d.eng.Stats().LiveSequences == 0 })
}

// earlyDeadline is a Transport whose Fetch fails with
// context.DeadlineExceeded at once, as a *GRPCTransport's does when grpc's
// own deadline timer fires before that of the caller's context.
type earlyDeadline struct{}

func (earlyDeadline) Serve(ctx context.Context, _ net.Listener, _ Source) error {
	<-ctx.Done()
	return ctx.Err()
}

func (earlyDeadline) Dial(_ context.Context, _ string, local Identity) (Conn, error) {
	return earlyConn{local}, nil
}

type earlyConn struct{ id Identity }

func (c earlyConn) Remote() Identity { return c.id }
func (earlyConn) Fetch(context.Context, uint64) (*Handoff, error) {
	return nil, context.DeadlineExceeded
}
func (earlyConn) Abort(context.Context, uint64, string) error { return nil }
func (earlyConn) Close() error                                { return nil }

// TestDecodeFetchDeadlineIsTimeout: a fetch that ends with the transport's
// context.DeadlineExceeded before the decode server's FetchTimeout context
// reports it is a transfer timeout (504 transfer_timeout), not the
// client's cancellation: it was answered 499 "cancelled" (seen about one
// run in ten of TestDecodeFetchTimeoutBoundsStalledPeer).
func TestDecodeFetchDeadlineIsTimeout(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{}, DecodeConfig{Transport: earlyDeadline{}, FetchTimeout: time.Minute})
	body := withFields(q391, map[string]any{"bootstrap_host": "127.0.0.1", "bootstrap_port": 1, "bootstrap_room": 5})
	resp, out := post(t, context.Background(), pd.dURL, body)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(out, "transfer_timeout") {
		t.Fatalf("%d %s, want 504 transfer_timeout", resp.StatusCode, out)
	}
}

// TestCancelEveryStage: a client that goes away at any stage of a PD
// request through the Router (before or during prefill, while the state
// is sent, while the answer streams) leaves nothing behind: prefill rooms
// (and their gauge, every state),
// the decode server's room gauge, live sequences and pending handoffs, the
// router's in-flight gauge and per-worker counts all return to 0, and the
// pair still answers afterwards: no cancellation counts against a worker's
// circuit breaker.
func TestCancelEveryStage(t *testing.T) {
	// A slow link (64 KiB frames 10 ms apart: the state and logits take
	// about 100 ms), so a cancellation can land in the transfer.
	pd := startPDWith(t, PrefillConfig{Transport: &GRPCTransport{ChunkBytes: 64 << 10, FrameDelay: 10 * time.Millisecond}},
		DecodeConfig{FetchTimeout: 5 * time.Second})
	rt, err := NewRouter(RouterConfig{PD: true, HealthInterval: -1,
		Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(rt.Handler())
	t.Cleanup(func() { rs.Close(); rt.Close() })
	idle := func() bool {
		for _, w := range rt.Workers() {
			if w.InFlight() != 0 {
				return false
			}
		}
		for st := RoomBootstrapping; st < RoomSuccess; st++ {
			if gauge(pd.p.roomGauge.WithLabelValues(st.String())) != 0 {
				return false
			}
		}
		return pd.p.Rooms().Live() == 0 && gauge(pd.d.live) == 0 && pd.d.eng.Stats().LiveSequences == 0 &&
			pd.d.back.nPend.Load() == 0 && gauge(rt.inflight) == 0
	}
	stream := withFields(q391, map[string]any{"stream": true, "max_tokens": 400, "ignore_eos": true})
	for _, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/chat/completions", strings.NewReader(stream))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		cancel()
		<-done
		waitFor(t, idle)
	}
	// Cancellations are not worker failures: no breaker opened (five
	// cancelled requests used to open the decode server's, 503 after).
	if resp, out := post(t, context.Background(), rs.URL, withFields(q391, map[string]any{"max_tokens": 3})); resp.StatusCode != 200 {
		t.Fatalf("after cancelled requests: %d %s", resp.StatusCode, out)
	}
	// During the transfer: cancel once the prefill side is sending.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/chat/completions", strings.NewReader(stream))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return pd.p.Rooms().Counts()[RoomTransferring] == 1 })
	cancel()
	<-done
	waitFor(t, idle)
	// While the answer streams: cancel after the first event.
	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/chat/completions", strings.NewReader(stream))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first event %q: %v", line, err)
	}
	if pd.d.eng.Stats().LiveSequences != 1 {
		t.Fatalf("%d live sequences while streaming", pd.d.eng.Stats().LiveSequences)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, idle)
	// The pair still answers.
	resp2, out := post(t, context.Background(), rs.URL, q391)
	if resp2.StatusCode != 200 || parseChat(t, out).summary() != "C:391|F:stop" {
		t.Fatalf("after the cancellations: %d %s", resp2.StatusCode, out)
	}
	waitFor(t, idle)
}

// gauge reads g's value.
func gauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	if g.Write(&m) != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// TestDecodeRefusesInconsistentState: a state for another sequence length
// than the handoff declares, a window one row short, another room's state
// or another prompt's are refused with a 502 OpenAI error (transfer_failed
// for a state that does not fit, transfer_mismatch for a prompt the decode
// side did not compute: a 500 without a code before), on both transports,
// and leave nothing behind.
func TestDecodeRefusesInconsistentState(t *testing.T) {
	pairs := tamperedPairs(t) // 0: gRPC, 1: in-process
	room := uint64(200)
	for _, tc := range []struct {
		name   string
		f      func(*Handoff)
		status int
		code   string
	}{
		{"position", func(h *Handoff) { h.State.Position-- }, http.StatusBadGateway, "transfer_failed"},
		{"short window", func(h *Handoff) {
			l := &h.State.Layers[0]
			l.Window = l.Window[:len(l.Window)-1]
		}, http.StatusBadGateway, "transfer_failed"},
		{"shorter prompt and position", func(h *Handoff) {
			h.Prompt = h.Prompt[:len(h.Prompt)-1]
			h.State.Position--
		}, http.StatusBadGateway, "transfer_mismatch"},
		{"other prompt", func(h *Handoff) { h.Prompt[0] ^= 1 }, http.StatusBadGateway, "transfer_mismatch"},
	} {
		for i, tp := range pairs {
			t.Run(fmt.Sprintf("%s/%d", tc.name, i), func(t *testing.T) {
				pd := tp.pd
				tp.f.Store(&tc.f)
				room++
				resp, out := pdAsk(t, pd, tp.port, room, q391)
				if resp.StatusCode != tc.status || !strings.Contains(out, tc.code) || !strings.HasPrefix(out, `{"error":{`) {
					t.Fatalf("decode answered %d %s, want %d %s", resp.StatusCode, out, tc.status, tc.code)
				}
				waitFor(t, func() bool {
					return pd.p.Rooms().Live() == 0 && pd.d.eng.Stats().LiveSequences == 0 && pd.d.back.nPend.Load() == 0 && gauge(pd.d.live) == 0
				})
			})
		}
	}
}

// flipListener's connections flip one bit of the byte at offset at of
// what they write (a link that corrupts data under TCP's checksum).
type flipListener struct {
	net.Listener
	at int64
}

func (l flipListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &flipConn{Conn: c, at: l.at}, nil
}

type flipConn struct {
	net.Conn
	mu  sync.Mutex
	off int64
	at  int64
}

func (c *flipConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if i := c.at - c.off; i >= 0 && i < int64(len(b)) {
		b = bytes.Clone(b)
		b[i] ^= 0x10
	}
	c.off += int64(len(b))
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// otherWeights serves rooms under an identity whose weights fingerprint
// differs (same config: a checkpoint fine-tuned from the same base).
type otherWeights struct{ *Rooms }

func (s otherWeights) Identity() Identity {
	id := s.Rooms.Identity()
	id.Weights = "0" + id.Weights[1:]
	return id
}

// TestTransportHostilePeer: a gRPC peer serving other weights is refused
// at the handshake (ErrIncompatible); a stream corrupted in flight fails
// with a typed error (a checksum, framing or transport one), never a
// wrong state, and its room is freed on both sides.
func TestTransportHostilePeer(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t)
	id := ModelIdentity(m, "a")
	tr := &GRPCTransport{}
	if _, err := tr.Dial(ctx, serve(t, tr, listen(t), otherWeights{NewRooms(id)}), id); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "weights") {
		t.Fatalf("peer with other weights: %v, want ErrIncompatible naming the weights", err)
	}
	h, err := PrefillHandoff(ctx, m, 1, testPrompt(30, m.Config().VocabSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range []int64{h.Bytes() / 3, h.Bytes() / 2, h.Bytes() - 4096} {
		rooms := NewRooms(id)
		conn, err := tr.Dial(ctx, serve(t, tr, flipListener{listen(t), at}, rooms), id)
		if err != nil {
			t.Fatal(err)
		}
		room := uint64(10 + i)
		rooms.Open(room)
		hh := *h
		rooms.Put(room, &hh)
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := conn.Fetch(fctx, room)
		cancel()
		if got != nil || !(errors.Is(err, ErrChecksum) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnavailable)) {
			t.Fatalf("bit flipped at %d of %d: %v, %v", at, h.Bytes(), got != nil, err)
		}
		t.Logf("bit flipped at %d of %d: %v", at, h.Bytes(), err)
		conn.Close()
		waitFor(t, func() bool { return rooms.Live() == 0 })
	}
}

// TestPeerRestartedWithOtherWeights: a decode side's connection outlives
// the prefill process it handshook with: grpc reconnects to whatever
// serves the address next. A prefill server restarted there with other
// weights of the same config (a new fine-tune) had its states accepted,
// the handshake never run again: only the config fingerprint was checked
// per fetch. Fetch now sends the weights fingerprint too and the prefill
// side refuses a mismatch (ErrIncompatible); the decode server drops such
// a connection, so the next request runs the handshake again.
func TestPeerRestartedWithOtherWeights(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t)
	id := ModelIdentity(m, "a")
	tr := &GRPCTransport{}
	lis := listen(t)
	addr := lis.Addr().String()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); tr.Serve(sctx, lis, NewRooms(id)) }()
	conn, err := tr.Dial(ctx, addr, id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop()
	<-done
	// The "restarted" prefill server, same address, other weights.
	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s not reusable: %v", addr, err)
	}
	rooms := NewRooms(id)
	serve(t, tr, lis2, otherWeights{rooms})
	h, err := PrefillHandoff(ctx, m, 1, testPrompt(10, m.Config().VocabSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	rooms.Open(1)
	rooms.Put(1, h)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if got, err := conn.Fetch(fctx, 1); got != nil || !errors.Is(err, ErrIncompatible) {
		t.Fatalf("fetch from a peer with other weights: %v, %v; want ErrIncompatible", got != nil, err)
	}
}

// TestFetchRefusesHugeFrame: a peer (with the right identity) whose Fetch
// sends one message larger than MaxFrameBytes (its length prefix claiming
// more than a frame can hold) is refused with ErrTooLarge, a typed error
// wrapping ErrMalformed (502 transfer_failed), before the message is
// read; it was an untyped "remote error ResourceExhausted" (500).
func TestFetchRefusesHugeFrame(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t)
	id := ModelIdentity(m, "a")
	desc := bootstrapDesc
	desc.Streams = []grpc.StreamDesc{{StreamName: "Fetch", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
		var in rawMsg
		if err := st.RecvMsg(&in); err != nil {
			return err
		}
		return st.SendMsg(&rawMsg{b: make([]byte, MaxFrameBytes+frameOverhead+1)})
	}}}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.MaxSendMsgSize(1<<30))
	gs.RegisterService(&desc, &grpcServer{t: &GRPCTransport{}, src: NewRooms(id)})
	lis := listen(t)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := (&GRPCTransport{}).Dial(ctx, lis.Addr().String(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = conn.Fetch(fctx, 1)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("a %d-byte frame: %v, want ErrTooLarge", MaxFrameBytes+frameOverhead+1, err)
	}
	if e := apiError(err); e.Status != http.StatusBadGateway || e.Code != "transfer_failed" {
		t.Fatalf("%v answered %d %s", err, e.Status, e.Code)
	}
}

// TestDialOtherGRPCService: a bootstrap port that is some other gRPC
// server (an operator's wrong port) is ErrIncompatible at Dial, a typed
// error (502 incompatible_peer from a decode server); it was an untyped
// "remote error Unimplemented" (500).
func TestDialOtherGRPCService(t *testing.T) {
	gs := grpc.NewServer()
	lis := listen(t)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	id := ModelIdentity(tinyModel(t), "a")
	_, err := (&GRPCTransport{}).Dial(context.Background(), lis.Addr().String(), id)
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("dial of another gRPC service: %v, want ErrIncompatible", err)
	}
	if e := apiError(err); e.Status != http.StatusBadGateway {
		t.Fatalf("%v answered %d", err, e.Status)
	}
}
