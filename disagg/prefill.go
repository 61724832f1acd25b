package disagg

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PrefillConfig configures a PrefillServer. Model is required.
type PrefillConfig struct {
	Model *dsv4.Model
	// Engine renders and tokenizes chat requests (Engine.ChatPrompt); nil
	// starts one with dsv4.NewEngine and default options.
	Engine *dsv4.Engine
	// Name is the served model name (default "dsv4"), reported in responses and
	// /v1/models. A request whose "model" is neither Name nor one of Aliases
	// (nor empty) gets 404 model_not_found, as from examples/server (and
	// vLLM); its room, in concurrent mode, fails at once.
	Name string
	// Aliases are other names accepted in "model" (e.g. the model path).
	Aliases []string
	// APIKey, when set, is required as "Authorization: Bearer APIKey" on
	// /v1/* (401 invalid_api_key otherwise, as examples/server's --api-key;
	// the router sends it with RouterConfig.WorkerAPIKey); /health,
	// /server_info and /metrics stay open.
	APIKey string
	// BootstrapHost is the host that sequential-mode transfer descriptors
	// advertise (default "127.0.0.1"); the port is that of the listener given
	// to ServeBootstrap.
	BootstrapHost string
	// Transport serves the bootstrap service (default &GRPCTransport{}).
	Transport Transport
	// MaxConcurrent bounds prefills running at once (default 2).
	MaxConcurrent int
	// ContextLength is the served context in tokens (SGLang's
	// --context-length): a prompt of ContextLength tokens or more, or with
	// prompt + max_tokens above it, is refused with 400
	// context_length_exceeded and its room failed at once. 0 (or more than
	// the model's max_position_embeddings) means the model's.
	ContextLength int
	// Lease and BootstrapTimeout: see Rooms (defaults 30 s).
	Lease, BootstrapTimeout time.Duration
	// MaxParkedStates and MaxParkedBytes bound the prefilled states the
	// server holds for decode servers (parked until fetched, released or
	// their Lease ends, or being sent), by count and by Handoff.Bytes:
	// Rooms.MaxParked and MaxParkedBytes. A request arriving when either
	// is reached, or whose state would go over MaxParkedBytes, gets 503
	// kv_pool_full (ErrPoolFull) and its room, in concurrent mode, fails at
	// once. 0 means DefaultMaxParkedStates and DefaultMaxParkedBytes; a
	// negative value is an error.
	MaxParkedStates int
	MaxParkedBytes  int64
	// MaxBodyBytes bounds a request body (examples/server's
	// --max-body-bytes): a larger one gets 413 request_too_large. 0 means
	// MaxBodyBytes (32 MiB); a negative value is an error.
	MaxBodyBytes int64
	// Registry receives the metrics (default: a new registry, served at
	// /metrics by Handler).
	Registry *prometheus.Registry
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of PrefillConfig.MaxParkedStates (vLLM's default max_num_seqs)
// and MaxParkedBytes (8 GiB).
const (
	DefaultMaxParkedStates       = 256
	DefaultMaxParkedBytes  int64 = 8 << 30
)

// PrefillServer is the prefill role: it serves POST /v1/chat/completions by
// prefilling the prompt and parking the request's Handoff in a room, and
// serves the rooms to decode servers on its bootstrap port.
//
// Concurrent mode (SGLang): the body carries bootstrap_host, bootstrap_port
// and bootstrap_room (the router sends the same body to the decode server);
// the response, sent when the decode side has fetched the state (or on
// failure), is a chat.completion with no choices, the prompt's usage and a
// "disaggregation" object {room, state, bytes}. Sequential mode: without a
// bootstrap_room the server picks a room and answers at once with
// kv_transfer_params {bootstrap_host, bootstrap_port, bootstrap_room}, the
// opaque descriptor the router hands to the decode server.
//
// GET /health, /server_info (the Identity), /v1/models and /metrics are
// served too, and POST /abort_request (abortRequest: a parked state
// released before its lease ends); other paths get a 404 OpenAI error
// object.
type PrefillServer struct {
	cfg   PrefillConfig
	eng   *dsv4.Engine
	own   bool
	rooms *Rooms
	id    Identity
	sem   chan struct{}
	port  atomic.Int64 // bootstrap port, set by StartBootstrap/ServeBootstrap while handlers read it
	log   *slog.Logger
	// created is the "created" time of /v1/models (server start, Unix s).
	created int64
	reg     *prometheus.Registry

	roomGauge   *prometheus.GaugeVec
	xferBytes   prometheus.Counter
	xferSeconds prometheus.Histogram
	failures    *prometheus.CounterVec
	prefillSecs prometheus.Histogram
}

// NewPrefillServer returns a prefill server for cfg.Model. A nil cfg.Model
// or a negative cfg.MaxBodyBytes is an error wrapping dsv4.ErrInvalidParams
// (as dsv4.NewEngine says of a nil Model); the engine's errors are returned
// as they are.
func NewPrefillServer(cfg PrefillConfig) (*PrefillServer, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: disagg: PrefillConfig.Model is nil", dsv4.ErrInvalidParams)
	}
	if cfg.Name == "" {
		cfg.Name = "dsv4"
	}
	var err error
	if cfg.MaxBodyBytes, err = bodyLimit("PrefillConfig.MaxBodyBytes", cfg.MaxBodyBytes); err != nil {
		return nil, err
	}
	if cfg.BootstrapHost == "" {
		cfg.BootstrapHost = "127.0.0.1"
	}
	if cfg.MaxParkedStates < 0 || cfg.MaxParkedBytes < 0 {
		return nil, fmt.Errorf("%w: disagg: PrefillConfig.MaxParkedStates and MaxParkedBytes must be >= 0 (0: %d states, %d bytes), got %d and %d",
			dsv4.ErrInvalidParams, DefaultMaxParkedStates, DefaultMaxParkedBytes, cfg.MaxParkedStates, cfg.MaxParkedBytes)
	}
	if cfg.MaxParkedStates == 0 {
		cfg.MaxParkedStates = DefaultMaxParkedStates
	}
	if cfg.MaxParkedBytes == 0 {
		cfg.MaxParkedBytes = DefaultMaxParkedBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 2
	}
	if cfg.Transport == nil {
		cfg.Transport = &GRPCTransport{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	p := &PrefillServer{cfg: cfg, eng: cfg.Engine, sem: make(chan struct{}, cfg.MaxConcurrent), log: cfg.Logger, reg: cfg.Registry,
		created: time.Now().Unix()}
	if p.eng == nil {
		e, err := dsv4.NewEngine(cfg.Model, dsv4.EngineOptions{})
		if err != nil {
			return nil, err
		}
		p.eng, p.own = e, true
	}
	p.id = ModelIdentity(cfg.Model, cfg.Name)
	p.rooms = NewRooms(p.id)
	p.rooms.Lease, p.rooms.BootstrapTimeout = cfg.Lease, cfg.BootstrapTimeout
	p.rooms.MaxParked, p.rooms.MaxParkedBytes = cfg.MaxParkedStates, cfg.MaxParkedBytes
	p.roomGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dsv4_disagg_prefill_rooms",
		Help: "Live rooms on the prefill server, by state."}, []string{"state"})
	p.xferBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_disagg_transfer_bytes_total",
		Help: "KV state bytes sent to decode servers."})
	p.xferSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_disagg_transfer_seconds",
		Help: "Time to send one room's state.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	p.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dsv4_disagg_prefill_failures_total",
		Help: "Failed prefill requests and transfers, by stage."}, []string{"stage"})
	p.prefillSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_disagg_prefill_seconds",
		Help: "Prefill compute time per request.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	parkedStates := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dsv4_disagg_prefill_parked_states",
		Help: "Prefilled states held for decode servers (parked or being sent)."},
		func() float64 { n, _ := p.rooms.Parked(); return float64(n) })
	parkedBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dsv4_disagg_prefill_parked_bytes",
		Help: "Bytes of the prefilled states held for decode servers."},
		func() float64 { _, b := p.rooms.Parked(); return float64(b) })
	p.reg.MustRegister(p.roomGauge, p.xferBytes, p.xferSeconds, p.failures, p.prefillSecs, parkedStates, parkedBytes)
	for s := RoomFailed + 1; s < RoomSuccess; s++ {
		p.roomGauge.WithLabelValues(s.String())
	}
	p.rooms.OnChange = func(from, to RoomState) {
		if from != RoomFailed {
			p.roomGauge.WithLabelValues(from.String()).Dec()
		}
		if to != RoomFailed && to != RoomSuccess {
			p.roomGauge.WithLabelValues(to.String()).Inc()
		}
	}
	if g, ok := cfg.Transport.(*GRPCTransport); ok && g.OnSent == nil {
		g.OnSent = func(n int64, d time.Duration, err error) {
			if err != nil {
				p.failures.WithLabelValues("transfer").Inc()
				return
			}
			p.xferBytes.Add(float64(n))
			p.xferSeconds.Observe(d.Seconds())
		}
	}
	return p, nil
}

// Identity returns the server's model identity.
func (p *PrefillServer) Identity() Identity { return p.id }

// Rooms returns the server's room table (its Source).
func (p *PrefillServer) Rooms() *Rooms { return p.rooms }

// ServeBootstrap serves the rooms to decode servers on lis until ctx ends.
// It records lis's TCP port as the bootstrap port (GET /server_info's
// bootstrap_port, and the port of sequential-mode kv_transfer_params) when
// it starts: run in its own goroutine, the port reads 0 until that
// goroutine runs; StartBootstrap records it before returning.
func (p *PrefillServer) ServeBootstrap(ctx context.Context, lis net.Listener) error {
	p.setBootstrapPort(lis)
	return p.cfg.Transport.Serve(ctx, lis, p.rooms)
}

// StartBootstrap records lis's TCP port as the bootstrap port, so that
// /server_info and sequential-mode kv_transfer_params report it from the
// moment StartBootstrap returns, then serves the rooms on lis in a new
// goroutine until ctx ends (as ServeBootstrap). The returned channel
// receives the service's result (nil or the transport's error) once and is
// then closed.
func (p *PrefillServer) StartBootstrap(ctx context.Context, lis net.Listener) <-chan error {
	p.setBootstrapPort(lis)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		errc <- p.cfg.Transport.Serve(ctx, lis, p.rooms)
	}()
	return errc
}

// setBootstrapPort records lis's port when it is a TCP listener.
func (p *PrefillServer) setBootstrapPort(lis net.Listener) {
	if ta, ok := lis.Addr().(*net.TCPAddr); ok {
		p.port.Store(int64(ta.Port))
	}
}

// Close fails the live rooms and, if the server started its engine, closes it.
func (p *PrefillServer) Close() error {
	p.rooms.Close()
	if p.own {
		return p.eng.Close(context.Background())
	}
	return nil
}

// Handler returns the HTTP API.
func (p *PrefillServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", openaierr.BearerAuth(p.cfg.APIKey, http.HandlerFunc(p.chat)))
	mux.Handle("/abort_request", openaierr.BearerAuth(p.cfg.APIKey, http.HandlerFunc(p.abortRequest)))
	mux.Handle("/v1/models", openaierr.BearerAuth(p.cfg.APIKey, serveModels(p.cfg.Name, p.created, contextLength(p.cfg.Model, p.cfg.ContextLength))))
	mux.Handle("/v1/models/{id...}", openaierr.BearerAuth(p.cfg.APIKey, serveModel(p.cfg.Name, p.cfg.Aliases, p.created, contextLength(p.cfg.Model, p.cfg.ContextLength))))
	mux.HandleFunc("/", notFound)
	mux.HandleFunc("/health", healthOK)
	mux.HandleFunc("/ping", healthOK) // vLLM: /ping is /health (SageMaker)
	mux.HandleFunc("/server_info", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, map[string]any{"role": "prefill", "identity": p.id,
			"bootstrap_port": p.port.Load(), "live_rooms": p.rooms.Live()})
	})
	mux.Handle("/metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	return mux
}

func randomRoom() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 1 // 63 bits, as SGLang
}

// samplingJSON is the canonical form of a request's sampling parameters
// that both sides compare.
func samplingJSON(req *dsv4.ChatRequest) (json.RawMessage, error) {
	sp, err := req.Sampling()
	if err != nil {
		return nil, err
	}
	return json.Marshal(sp)
}

func (p *PrefillServer) chat(w http.ResponseWriter, r *http.Request) {
	req, bs, concurrent, ok := readChat(w, r, p.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	if !concurrent {
		bs = Bootstrap{Host: p.cfg.BootstrapHost, Port: int(p.port.Load()), Room: randomRoom()}
	}
	// A request that fails validation fails its room at once (concurrent
	// mode): the decode side waiting for it answers with the same 4xx
	// instead of waiting for its fetch timeout.
	reject := func(err error) {
		p.failures.WithLabelValues("request").Inc()
		if st := apiError(err).Status; concurrent && st >= 400 && st < 500 {
			p.rooms.Reject(bs.Room, err)
		} else if concurrent {
			p.rooms.Fail(bs.Room, err)
		}
		writeErr(w, err)
	}
	if err := checkServed(&req, p.cfg.Name, p.cfg.Aliases); err != nil {
		reject(err)
		return
	}
	prompt, err := p.eng.ChatPrompt(&req)
	if err != nil {
		reject(err)
		return
	}
	samp, err := samplingJSON(&req)
	if err != nil {
		reject(err)
		return
	}
	sp, _ := req.Sampling()
	cfg := p.cfg.Model.Config()
	if err := checkRequest(prompt, sp, cfg.VocabSize, contextLength(p.cfg.Model, p.cfg.ContextLength)); err != nil {
		reject(err)
		return
	}
	if err := p.rooms.Admit(); err != nil {
		p.failures.WithLabelValues("pool_full").Inc()
		if concurrent {
			// the decode side waiting for it fails at once, and says why
			p.rooms.failWith(bs.Room, fmt.Errorf("%w: %w", ErrAborted, err))
		}
		writeErr(w, err)
		return
	}
	if err := p.rooms.Open(bs.Room); err != nil {
		p.failures.WithLabelValues("room").Inc()
		writeErr(w, err)
		return
	}
	ctx := r.Context()
	h, err := p.prefill(ctx, bs.Room, prompt, samp)
	if err != nil {
		p.rooms.Fail(bs.Room, err)
		p.failures.WithLabelValues("prefill").Inc()
		writeErr(w, err)
		return
	}
	nBytes := h.Bytes()                             // h belongs to the room (and then to the decode side) after Put
	if err := p.rooms.Put(bs.Room, h); err != nil { // the room is failed
		if errors.Is(err, ErrPoolFull) {
			p.failures.WithLabelValues("pool_full").Inc()
		}
		writeErr(w, err)
		return
	}
	usage := dsv4.Usage{PromptTokens: len(prompt), TotalTokens: len(prompt)}
	resp := map[string]any{"id": openaiwire.NewID("chatcmpl-"), "object": "chat.completion", "created": time.Now().Unix(),
		"model": p.cfg.Name, "choices": []any{}, "usage": usage}
	if !concurrent {
		resp["kv_transfer_params"] = bs
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, resp)
		return
	}
	// Concurrent mode: answer once the decode side has the state. If the
	// router goes away first, the room is aborted unless it is being sent.
	err = p.rooms.Wait(ctx, bs.Room)
	if ctx.Err() != nil {
		p.abortIfWaiting(bs.Room, "prefill request cancelled by its client")
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	resp["disaggregation"] = map[string]any{"room": bs.Room, "state": "success", "bytes": nBytes}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, resp)
}

// abortIfWaiting fails a room that is not being transferred (a transfer in
// flight is left to finish: the decode side owns that outcome) with
// reason; it reports whether it did.
func (p *PrefillServer) abortIfWaiting(id uint64, reason string) bool {
	p.rooms.mu.Lock()
	r, ok := p.rooms.rooms[id]
	busy := ok && r.state == RoomTransferring
	p.rooms.mu.Unlock()
	if ok && !busy {
		p.rooms.Fail(id, errors.New(reason))
	}
	return ok && !busy
}

// abortRequest serves POST /abort_request {"bootstrap_room": N} (SGLang's
// endpoint of that name aborts by request id): the state of room N, parked
// for a decode server that will not fetch it (the Router's sequential mode
// when the decode leg fails or its client leaves between the legs), is
// released now instead of at the end of its Lease. A room being sent is
// left to finish. The answer is {"bootstrap_room": N, "aborted": bool}
// (false: unknown, finished or being sent); a body without a room id
// gets 400.
func (p *PrefillServer) abortRequest(w http.ResponseWriter, r *http.Request) {
	_, raw, ok := readJSONObject(w, r, p.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	var room uint64
	if err := json.Unmarshal(raw["bootstrap_room"], &room); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "bootstrap_room must be a non-negative integer")
		return
	}
	aborted := p.abortIfWaiting(room, "released by the router: the decode side will not fetch it")
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, map[string]any{"bootstrap_room": room, "aborted": aborted})
}

func (p *PrefillServer) prefill(ctx context.Context, room uint64, prompt []int32, samp json.RawMessage) (*Handoff, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	t0 := time.Now()
	h, err := PrefillHandoff(ctx, p.cfg.Model, room, prompt, samp)
	if err == nil {
		p.prefillSecs.Observe(time.Since(t0).Seconds())
	}
	return h, err
}
