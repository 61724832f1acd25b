package disagg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
	"github.com/dsv4go/dsv4go/internal/tokenizeapi"
	"github.com/dsv4go/dsv4go/internal/vllmmetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrMismatch: the transferred state was made from another prompt or other
// sampling parameters than the decode side computed for the same request
// (the router sends both servers the same body, so the prefill server
// rendered or tokenized it otherwise: another chat template or tokenizer,
// another PrefillConfig.Engine, a faulty peer). The decode server answers
// it 502 with code "transfer_mismatch", as its other transfer errors, and
// the Router counts it against the prefill server.
var ErrMismatch = errors.New("disagg: prefill and decode disagree on the request")

// DecodeConfig configures a DecodeServer. Model is required.
type DecodeConfig struct {
	Model *dsv4.Model
	// Name is the served model name (default "dsv4"), reported in responses and
	// /v1/models. A request whose "model" is neither Name nor one of Aliases
	// (nor empty) gets 404 model_not_found before any state is fetched, as
	// from examples/server (and vLLM); its room, if any, is aborted.
	Name string
	// Aliases are other names accepted in "model" (e.g. the model path).
	Aliases []string
	// APIKey, when set, is required as "Authorization: Bearer APIKey" on
	// /v1/*, /tokenize and /detokenize (401 invalid_api_key otherwise, as
	// examples/server's --api-key; the router sends it with
	// RouterConfig.WorkerAPIKey); /health, /server_info and /metrics stay
	// open.
	APIKey string
	// EngineOptions configure the decode engine (StepTokens is overridden:
	// a prompt must reach the backend in one call).
	EngineOptions dsv4.EngineOptions
	// Transport dials prefill servers (default &GRPCTransport{}). A
	// GRPCTransport's unset Limits become LimitsFor(Model's config,
	// ContextLength): a prefill server can send at most the largest state
	// the model holds at the served context (plus its logits); a larger
	// stream is refused with ErrTooLarge (502 transfer_failed) before it is
	// buffered.
	Transport Transport
	// FetchTimeout bounds the wait for a room's state, connecting to the
	// prefill server and the handshake included (default 60 s): 504
	// transfer_timeout after it.
	FetchTimeout time.Duration
	// MaxBodyBytes bounds a request body on /v1/chat/completions,
	// /tokenize and /detokenize (examples/server's --max-body-bytes): a
	// larger one gets 413 request_too_large. 0 means MaxBodyBytes
	// (32 MiB); a negative value is an error.
	MaxBodyBytes int64
	// ContextLength is the served context in tokens (SGLang's
	// --context-length): a prompt of ContextLength tokens or more, or with
	// prompt + max_tokens above it, is refused with 400
	// context_length_exceeded before any state is fetched. 0 (or more than
	// the model's max_position_embeddings) means the model's.
	ContextLength int
	// AllowedBootstrapHosts limits the prefill hosts that a request's
	// bootstrap_host (or kv_transfer_params) may name; a request naming
	// another gets 403 bootstrap_host_not_allowed without any connection.
	// Empty (the zero value): the loopback hosts only (127.0.0.0/8, ::1,
	// localhost), so a decode server on a network names its prefill hosts
	// explicitly; AnyHost is SGLang's behaviour (any host: only when no one
	// but the router can reach the decode server). A non-empty list replaces
	// the loopback default (name 127.0.0.1 too to keep local prefill
	// servers), and host names are compared as written, never resolved
	// ("localhost" and "127.0.0.1" are different entries). The client gets a
	// *BootstrapNotAllowedError; the log gets a warning with the host, the
	// room and the list, at most one per host per minute: a warning's
	// "suppressed" attribute counts that host's refusals not logged since
	// its previous one ("suppressed_other_hosts", when present, those of
	// hosts not tracked: at most 256 are, and a host seen while the table
	// is full of recent ones is counted there, never logged by name).
	AllowedBootstrapHosts HostAllowList
	// Registry receives the metrics (default: a new registry, served at
	// /metrics by Handler).
	Registry *prometheus.Registry
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// DecodeServer is the decode role: it serves POST /v1/chat/completions. A
// request with bootstrap fields (concurrent mode) or kv_transfer_params
// (sequential mode) has its state fetched from the named prefill server
// (handshake once per prefill server, then one Fetch per room), checked
// against the prompt and sampling parameters the decode side computes
// itself, and admitted into a continuous-batching dsv4.Engine as if it had
// been prefilled there; the output is an OpenAI chat.completion or SSE
// stream. A request without them is served locally (decode-only fallback).
// A client disconnect cancels the fetch (aborting the room on the prefill
// side) or the generation.
//
// GET /health, /server_info, /v1/models, /v1/models/{id} and /metrics
// are served too, and vLLM's POST /tokenize and /detokenize (behind
// APIKey; the same code and answers as examples/server's, through
// internal/tokenizeapi: the ids the decode engine would prefill, the
// served context as max_model_len); other paths get a 404 OpenAI error
// object. /metrics carries, beside the dsv4_* series, vLLM's (vllm:*, as
// examples/server exports them: package internal/vllmmetrics), a
// transferred prompt counted at its first token as on vLLM's decode
// instance. The live-state gauge dsv4_disagg_decode_rooms returns to 0 when
// no request is in flight.
type DecodeServer struct {
	cfg  DecodeConfig
	lim  Limits // what a transferred stream may hold (LimitsFor)
	eng  *dsv4.Engine
	back *decodeBackend
	id   Identity
	log  *slog.Logger
	reg  *prometheus.Registry
	// created is the "created" time of /v1/models (server start, Unix s).
	created int64

	// allowed is AllowedBootstrapHosts as refusal warnings show it.
	allowed string
	// refusals throttles the warnings of refused bootstrap_hosts.
	refusals *refusalLog

	mu    sync.Mutex
	conns map[string]Conn

	live        prometheus.Gauge
	fetchSecs   prometheus.Histogram
	fetchBytes  prometheus.Counter
	failures    *prometheus.CounterVec
	restoredCtr prometheus.CounterFunc
	vllm        *vllmmetrics.Requests
}

// NewDecodeServer starts a decode server's engine for cfg.Model. A nil
// cfg.Model or a negative cfg.MaxBodyBytes is an error wrapping
// dsv4.ErrInvalidParams (as dsv4.NewEngine says of a nil Model); the
// engine's errors are returned as they are.
func NewDecodeServer(cfg DecodeConfig) (*DecodeServer, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: disagg: DecodeConfig.Model is nil", dsv4.ErrInvalidParams)
	}
	if cfg.Name == "" {
		cfg.Name = "dsv4"
	}
	var err error
	if cfg.MaxBodyBytes, err = bodyLimit("DecodeConfig.MaxBodyBytes", cfg.MaxBodyBytes); err != nil {
		return nil, err
	}
	if cfg.Transport == nil {
		cfg.Transport = &GRPCTransport{}
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	eng, back, err := newDecodeEngine(cfg.Model, cfg.ContextLength, cfg.EngineOptions)
	if err != nil {
		return nil, err
	}
	d := &DecodeServer{cfg: cfg, lim: LimitsFor(cfg.Model.Config(), back.MaxContext()), eng: eng, back: back, id: ModelIdentity(cfg.Model, cfg.Name), log: cfg.Logger,
		reg: cfg.Registry, conns: map[string]Conn{}, created: time.Now().Unix(),
		allowed: cfg.AllowedBootstrapHosts.String(), refusals: newRefusalLog()}
	if d.allowed == "" {
		d.allowed = "loopback (default)"
	}
	d.live = prometheus.NewGauge(prometheus.GaugeOpts{Name: "dsv4_disagg_decode_rooms",
		Help: "Requests on the decode server that hold or await transferred state."})
	d.fetchSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dsv4_disagg_fetch_seconds",
		Help: "Time from asking a prefill server for a room to holding its state.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)})
	d.fetchBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_disagg_received_bytes_total",
		Help: "KV state bytes received from prefill servers."})
	d.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dsv4_disagg_decode_failures_total",
		Help: "Failed disaggregated requests on the decode server, by stage."}, []string{"stage"})
	d.restoredCtr = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dsv4_disagg_restored_prompts_total",
		Help: "Prompts admitted from transferred state instead of a local prefill."}, func() float64 { return float64(back.restored.Load()) })
	live := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dsv4_engine_live_sequences",
		Help: "Sequences holding state in the decode engine."}, func() float64 { return float64(eng.Stats().LiveSequences) })
	d.reg.MustRegister(d.live, d.fetchSecs, d.fetchBytes, d.failures, d.restoredCtr, live)
	// vLLM's series, as examples/server exports them (package
	// internal/vllmmetrics): the engine's gauges and prefix cache
	// counters, and the request-level series of every chat request, a
	// prompt restored from transferred state counted as vLLM's decode
	// instance counts it (at its first token).
	if d.vllm, err = vllmmetrics.NewRequests(d.reg, cfg.Name, back.MaxContext()); err == nil {
		err = vllmmetrics.RegisterEngine(d.reg, cfg.Name, eng.Stats)
	}
	if err != nil {
		eng.Close(context.Background())
		return nil, err
	}
	return d, nil
}

// Identity returns the server's model identity.
func (d *DecodeServer) Identity() Identity { return d.id }

// Limits returns what a stream from a prefill server may hold when the
// transport's own Limits leave it unset: LimitsFor(the model's config, the
// served context length).
func (d *DecodeServer) Limits() Limits { return d.lim }

// Engine returns the decode engine.
func (d *DecodeServer) Engine() *dsv4.Engine { return d.eng }

// Close closes the connections to prefill servers and the engine.
func (d *DecodeServer) Close() error {
	d.mu.Lock()
	for k, c := range d.conns {
		c.Close()
		delete(d.conns, k)
	}
	d.mu.Unlock()
	return d.eng.Close(context.Background())
}

// Handler returns the HTTP API.
func (d *DecodeServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", openaierr.BearerAuth(d.cfg.APIKey, http.HandlerFunc(d.chat)))
	mux.Handle("/v1/models", openaierr.BearerAuth(d.cfg.APIKey, serveModels(d.cfg.Name, d.created, d.back.MaxContext())))
	mux.Handle("/v1/models/{id...}", openaierr.BearerAuth(d.cfg.APIKey, serveModel(d.cfg.Name, d.cfg.Aliases, d.created, d.back.MaxContext())))
	tok := &tokenizeapi.API{Engine: d.eng, Model: d.cfg.Name, Aliases: d.cfg.Aliases,
		MaxModelLen: d.back.MaxContext(), MaxBodyBytes: d.cfg.MaxBodyBytes}
	mux.Handle("/tokenize", openaierr.BearerAuth(d.cfg.APIKey, tok.TokenizeHandler()))
	mux.Handle("/detokenize", openaierr.BearerAuth(d.cfg.APIKey, tok.DetokenizeHandler()))
	mux.HandleFunc("/", notFound)
	mux.HandleFunc("/health", healthOK)
	mux.HandleFunc("/ping", healthOK) // vLLM: /ping is /health (SageMaker)
	mux.HandleFunc("/server_info", func(w http.ResponseWriter, r *http.Request) {
		st := d.eng.Stats()
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, map[string]any{"role": "decode", "identity": d.id,
			"live_sequences": st.LiveSequences, "pending_handoffs": d.back.nPend.Load()})
	})
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	return mux
}

// conn returns the cached connection to a prefill server, dialing (and
// running the handshake) on first use.
func (d *DecodeServer) conn(ctx context.Context, addr string) (Conn, error) {
	d.mu.Lock()
	c := d.conns[addr]
	d.mu.Unlock()
	if c != nil {
		return c, nil
	}
	var err error
	if ld, ok := d.cfg.Transport.(limitDialer); ok {
		c, err = ld.dialLimits(ctx, addr, d.id, d.lim)
	} else {
		c, err = d.cfg.Transport.Dial(ctx, addr, d.id)
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if old := d.conns[addr]; old != nil {
		d.mu.Unlock()
		c.Close()
		return old, nil
	}
	d.conns[addr] = c
	d.mu.Unlock()
	return c, nil
}

func (d *DecodeServer) dropConn(addr string, c Conn) {
	d.mu.Lock()
	if d.conns[addr] == c {
		delete(d.conns, addr)
		c.Close()
	}
	d.mu.Unlock()
}

func (d *DecodeServer) chat(w http.ResponseWriter, r *http.Request) {
	req, bs, pd, ok := readChat(w, r, d.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	ctx := r.Context()
	if err := checkServed(&req, d.cfg.Name, d.cfg.Aliases); err != nil {
		if pd {
			d.failures.WithLabelValues("request").Inc()
			if d.cfg.AllowedBootstrapHosts.Allows(bs.Host) {
				d.abort(bs, "invalid request on decode side: "+err.Error())
			}
		}
		writeErr(w, err)
		return
	}
	arrival := time.Now()
	if !pd {
		stream, err := d.eng.ChatStream(ctx, &req)
		if err != nil {
			writeErr(w, err)
			return
		}
		stream = d.vllm.Observe(ctx, arrival, stream)
		_ = writeChat(w, r, &req, d.cfg.Name, stream, nil)
		return
	}
	if !d.cfg.AllowedBootstrapHosts.Allows(bs.Host) {
		d.failures.WithLabelValues("request").Inc()
		d.warnRefused(bs)
		writeErr(w, &BootstrapNotAllowedError{Host: bs.Host})
		return
	}
	d.live.Inc()
	defer d.live.Dec()
	prompt, err := d.eng.ChatPrompt(&req)
	if err != nil {
		d.failures.WithLabelValues("request").Inc()
		d.abort(bs, "invalid request on decode side")
		writeErr(w, err)
		return
	}
	samp, err := samplingJSON(&req)
	if err == nil {
		// The checks the engine runs at admission, before waiting for the
		// room: an invalid request answers at once, as on the prefill side.
		sp, _ := req.Sampling()
		err = checkRequest(prompt, sp, d.back.VocabSize(), d.back.MaxContext())
	}
	if err != nil {
		d.failures.WithLabelValues("request").Inc()
		d.abort(bs, "invalid request on decode side: "+err.Error())
		writeErr(w, err)
		return
	}
	h, err := d.fetch(ctx, bs)
	if err != nil {
		if ctx.Err() == nil {
			writeErr(w, err)
		}
		return
	}
	if v := d.back.VocabSize(); len(h.Logits) != v { // any Transport: InProcess does not decode
		d.failures.WithLabelValues("restore").Inc()
		writeErr(w, fmt.Errorf("%w: transferred state has %d logits, the vocabulary %d", ErrMalformed, len(h.Logits), v))
		return
	}
	if !slices.Equal(h.Prompt, prompt) {
		d.failures.WithLabelValues("mismatch").Inc()
		writeErr(w, fmt.Errorf("%w: prompt of %d tokens from prefill, %d here", ErrMismatch, len(h.Prompt), len(prompt)))
		return
	}
	if !bytes.Equal(h.Sampling, samp) {
		d.failures.WithLabelValues("mismatch").Inc()
		writeErr(w, fmt.Errorf("%w: sampling parameters %s from prefill, %s here", ErrMismatch, h.Sampling, samp))
		return
	}
	n := 1
	if req.N != nil && *req.N > 0 {
		n = *req.N
	}
	release, err := d.back.register(h, n)
	if err != nil {
		d.failures.WithLabelValues("restore").Inc()
		writeErr(w, fmt.Errorf("%w: %w", ErrMalformed, err))
		return
	}
	defer release()
	stream, err := d.eng.ChatStream(ctx, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	stream = d.vllm.Observe(ctx, arrival, stream)
	if err := writeChat(w, r, &req, d.cfg.Name, stream, nil); err != nil && ctx.Err() == nil {
		d.failures.WithLabelValues("generate").Inc()
	}
}

// warnRefused logs the refusal of bs.Host unless refusals throttles it.
func (d *DecodeServer) warnRefused(bs Bootstrap) {
	rw, ok := d.refusals.note(bs.Host)
	if !ok {
		return
	}
	args := []any{"host", rw.host, "room", bs.Room, "allowed", d.allowed, "suppressed", rw.suppressed}
	if rw.other > 0 {
		args = append(args, "suppressed_other_hosts", rw.other)
	}
	d.log.Warn("refused a bootstrap_host outside the allow-list (see --allowed-bootstrap-hosts / DecodeConfig.AllowedBootstrapHosts); "+
		"logged at most once a minute per host", args...)
}

// fetch gets room bs.Room from its prefill server within FetchTimeout,
// connecting (and the handshake) included: a peer that accepts and never
// answers is given up on then, not after the handshake's own 10 s.
func (d *DecodeServer) fetch(ctx context.Context, bs Bootstrap) (*Handoff, error) {
	t0 := time.Now()
	addr := bs.Addr()
	fctx, cancel := context.WithTimeout(ctx, d.cfg.FetchTimeout)
	defer cancel()
	// timedOut: FetchTimeout passed, not the client's own deadline (grpc's
	// deadline timer can fire before fctx's: context.DeadlineExceeded
	// while fctx.Err() is still nil, which read as a cancellation, 499).
	timedOut := func(err error) bool {
		return ctx.Err() == nil && (fctx.Err() != nil || errors.Is(err, context.DeadlineExceeded))
	}
	c, err := d.conn(fctx, addr)
	if err != nil {
		d.failures.WithLabelValues("connect").Inc()
		if timedOut(err) {
			return nil, fmt.Errorf("%w: waited %v for room %d: connecting to %s: %v", ErrTimeout, d.cfg.FetchTimeout, bs.Room, addr, err)
		}
		return nil, err
	}
	h, err := c.Fetch(fctx, bs.Room)
	if err != nil {
		d.failures.WithLabelValues("fetch").Inc()
		if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIncompatible) {
			d.dropConn(addr, c) // the next request dials and runs the handshake again
		}
		if ctx.Err() != nil {
			d.abort(bs, "decode side gave up: "+ctx.Err().Error())
		} else if timedOut(err) {
			d.abort(bs, "decode side gave up: "+context.DeadlineExceeded.Error())
			return nil, fmt.Errorf("%w: waited %v for room %d", ErrTimeout, d.cfg.FetchTimeout, bs.Room)
		}
		return nil, err
	}
	d.fetchSecs.Observe(time.Since(t0).Seconds())
	d.fetchBytes.Add(float64(h.Bytes()))
	return h, nil
}

// abort tells the prefill server to drop a room (best effort, bounded).
func (d *DecodeServer) abort(bs Bootstrap, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.conn(ctx, bs.Addr())
	if err != nil {
		return
	}
	_ = c.Abort(ctx, bs.Room, reason)
}
