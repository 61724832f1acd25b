package disagg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
)

// Worker is one engine server behind the Router: its URL, role, health,
// circuit breaker and in-flight count.
type Worker struct {
	// URL is the server's base URL (http://host:port).
	URL string
	// Role is "prefill", "decode" or "regular".
	Role string
	// BootstrapPort is a prefill server's bootstrap port (0: unknown).
	BootstrapPort int

	host     string
	inflight atomic.Int64

	mu          sync.Mutex
	healthy     bool
	healthFails int
	reason      string
	identity    *Identity
	consecFails int
	// The circuit breaker is closed while openUntil is zero, open until
	// openUntil, then half-open: one trial request at a time (trial,
	// numbered trialGen) until a reported outcome closes or re-opens it.
	openUntil time.Time
	trial     bool
	trialGen  uint64
}

// InFlight is the number of requests the router has outstanding on w.
func (w *Worker) InFlight() int64 {
	if w == nil {
		return 0
	}
	return w.inflight.Load()
}

// Healthy reports the last health verdict (false for a nil w).
func (w *Worker) Healthy() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.healthy
}

// available: healthy and the breaker lets a request through (closed, or
// half-open with no trial request out).
func (w *Worker) available(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.healthy && !w.blocked(now)
}

// blocked reports whether the breaker refuses a request now: open, or
// half-open with its trial request out. w.mu is held.
func (w *Worker) blocked(now time.Time) bool {
	return !w.openUntil.IsZero() && (now.Before(w.openUntil) || w.trial)
}

// claim takes w for one request if it is available: a half-open breaker
// lets exactly one request through, whose trial number (non-zero) claim
// returns; 0 for a closed breaker. The caller gives a trial back with
// endTrial when the attempt ends, whatever happened.
func (w *Worker) claim(now time.Time) (trial uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.healthy || w.blocked(now) {
		return 0, false
	}
	if w.openUntil.IsZero() {
		return 0, true
	}
	w.trial = true
	w.trialGen++
	return w.trialGen, true
}

// endTrial ends trial number trial (0: none) if no outcome was reported
// for it (the client went away, the request was the client's error, the
// other leg was blamed): the breaker stays half-open and the next request
// may be the trial.
func (w *Worker) endTrial(trial uint64) {
	if trial == 0 {
		return
	}
	w.mu.Lock()
	if w.trial && w.trialGen == trial {
		w.trial = false
	}
	w.mu.Unlock()
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// PD selects prefill-decode disaggregation (SGLang's
	// --pd-disaggregation); otherwise requests go to Workers.
	PD bool
	// Workers are the regular (co-located) servers' URLs.
	Workers []string
	// Prefill are the prefill servers: URL and bootstrap port.
	Prefill []PrefillWorker
	// Decode are the decode servers' URLs.
	Decode []string
	// Policy names the selection policy (NewPolicy); PrefillPolicy and
	// DecodePolicy override it per role in PD mode.
	Policy, PrefillPolicy, DecodePolicy string
	// Picker, when set, is a Policy of your own that picks every worker
	// (Worker.Role tells prefill from decode); the named policies are then
	// not used. It gets only healthy, compatible, not yet tried workers,
	// never an empty list, from many goroutines at once; a nil answer, or
	// a worker not among them, means none is available (503, as when no
	// worker is healthy).
	Picker Policy
	// Sequential selects the sequential coordination (prefill first, its
	// kv_transfer_params handed to decode) instead of concurrent dispatch.
	Sequential bool
	// MaxAttempts bounds the attempts of one request (default 3); a retry
	// happens only before the first response byte, with a new pair and room.
	MaxAttempts int
	// HealthInterval is the period of health checks (default 5 s; < 0
	// disables them); HealthFailures consecutive failed checks mark a worker
	// unhealthy (default 2: SGLang's 5 s × 2 misses).
	HealthInterval time.Duration
	HealthFailures int
	// BreakerFailures consecutive request failures open a worker's circuit
	// breaker for BreakerCooldown (defaults 3 and 10 s). It is half-open
	// then: one trial request at a time goes to the worker (the others to
	// other workers, or 503 when there is none), whose success closes the
	// breaker and whose failure re-opens it for another BreakerCooldown.
	BreakerFailures int
	BreakerCooldown time.Duration
	// APIKey, when set, is required of clients as "Authorization: Bearer
	// APIKey" on /v1/*, /tokenize, /detokenize and /workers (401
	// invalid_api_key otherwise, as examples/server's --api-key); /health,
	// /version and /metrics stay open.
	APIKey string
	// WorkerAPIKey, when set, is sent to the workers as their Bearer key on
	// every forwarded request; when empty, forwarded requests carry the
	// client's Authorization header unchanged (so one key shared by the
	// router and its workers works either way).
	WorkerAPIKey string
	// ModelName is the model id that GET /v1/models reports when no worker
	// answers it (default: the served names the workers report in
	// /server_info, else "dsv4").
	ModelName string
	// Client sends the requests (default: a client with no overall timeout).
	Client *http.Client
	// MaxBodyBytes bounds a client's request body (examples/server's
	// --max-body-bytes): a larger one gets 413 request_too_large without
	// reaching a worker. 0 means MaxBodyBytes (32 MiB); a negative value is
	// an error.
	MaxBodyBytes int64
	// Registry receives the metrics (default: a new one served at /metrics).
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// PrefillWorker is a prefill server's URL and bootstrap port.
type PrefillWorker struct {
	URL           string
	BootstrapPort int
}

// Router is the OpenAI-compatible front of a fleet: regular mode forwards
// each request to one worker; PD mode pairs a prefill and a decode server
// per request. Requests are passed through as raw JSON: only the fields the
// router owns (bootstrap_host, bootstrap_port, bootstrap_room,
// kv_transfer_params) are set or removed; every other field (tools,
// chat_template_kwargs, unknown fields) keeps its raw JSON value (numbers,
// escapes and key order inside it untouched; only whitespace between the
// top-level fields may change as the object is re-serialized).
// Responses are streamed through as they come (SSE included; a JSON
// answer is held until its end, up to MaxBodyBytes). Retries happen only
// before the first response byte reaches the client; a stream cut after
// that ends with an OpenAI error event. Every error the client gets is an
// OpenAI error object (a worker's other error bodies are wrapped in one).
type Router struct {
	cfg     RouterConfig
	regular []*Worker
	prefill []*Worker
	decode  []*Worker
	polR    Policy
	polP    Policy
	polD    Policy
	client  *http.Client
	log     *slog.Logger
	reg     *prometheus.Registry
	stop    context.CancelFunc
	wg      sync.WaitGroup
	started int64 // Unix time of NewRouter ("created" of /v1/models)

	requests *prometheus.CounterVec
	stage    *prometheus.HistogramVec
	retries  prometheus.Counter
	healthy  *prometheus.GaugeVec
	breakers prometheus.Counter
	inflight prometheus.Gauge
	vllm     *relayMetrics // vLLM's series (relayMetrics)
}

// NewRouter builds a router and starts its health checks (stop them with
// Close). A configuration that could only fail request by request is an
// error wrapping dsv4.ErrInvalidParams: a worker URL that is not
// http(s)://host[:port], a bootstrap port outside 0..65535, Workers in PD
// mode or Prefill/Decode in regular mode (they would be ignored).
func NewRouter(cfg RouterConfig) (*Router, error) {
	var err error
	if cfg.MaxBodyBytes, err = bodyLimit("RouterConfig.MaxBodyBytes", cfg.MaxBodyBytes); err != nil {
		return nil, err
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 5 * time.Second
	}
	if cfg.HealthFailures <= 0 {
		cfg.HealthFailures = 2
	}
	if cfg.BreakerFailures <= 0 {
		cfg.BreakerFailures = 3
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	rt := &Router{cfg: cfg, client: cfg.Client, log: cfg.Logger, reg: cfg.Registry, started: time.Now().Unix()}
	if rt.client == nil {
		rt.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	}
	mk := func(u, role string, port int) (*Worker, error) {
		pu, err := url.Parse(strings.TrimRight(u, "/"))
		if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
			return nil, fmt.Errorf("%w: disagg: bad %s worker URL %q (want http://host:port)", dsv4.ErrInvalidParams, role, u)
		}
		if port < 0 || port > 65535 {
			return nil, fmt.Errorf("%w: disagg: bootstrap port %d of %s outside 0..65535 (0: learned from /server_info)", dsv4.ErrInvalidParams, port, u)
		}
		return &Worker{URL: strings.TrimRight(u, "/"), Role: role, BootstrapPort: port, host: pu.Hostname(), healthy: true}, nil
	}
	// A server list of the other mode would be ignored: refuse it.
	switch {
	case cfg.PD && len(cfg.Workers) > 0:
		return nil, fmt.Errorf("%w: disagg: RouterConfig.Workers (--worker-urls) is regular mode's; PD mode takes Prefill and Decode", dsv4.ErrInvalidParams)
	case !cfg.PD && len(cfg.Prefill) > 0:
		return nil, fmt.Errorf("%w: disagg: RouterConfig.Prefill is PD mode's (set PD); regular mode takes Workers", dsv4.ErrInvalidParams)
	case !cfg.PD && len(cfg.Decode) > 0:
		return nil, fmt.Errorf("%w: disagg: RouterConfig.Decode is PD mode's (set PD); regular mode takes Workers", dsv4.ErrInvalidParams)
	}
	if cfg.PD {
		if len(cfg.Prefill) == 0 || len(cfg.Decode) == 0 {
			return nil, errors.New("disagg: PD mode needs at least one prefill and one decode server")
		}
		for _, p := range cfg.Prefill {
			w, err := mk(p.URL, "prefill", p.BootstrapPort)
			if err != nil {
				return nil, err
			}
			rt.prefill = append(rt.prefill, w)
		}
		for _, u := range cfg.Decode {
			w, err := mk(u, "decode", 0)
			if err != nil {
				return nil, err
			}
			rt.decode = append(rt.decode, w)
		}
		pp, dp := cfg.PrefillPolicy, cfg.DecodePolicy
		if pp == "" {
			pp = cfg.Policy
		}
		if dp == "" {
			dp = cfg.Policy
		}
		if cfg.Picker != nil {
			rt.polP, rt.polD = cfg.Picker, cfg.Picker
		} else {
			if rt.polP, err = NewPolicy(pp); err != nil {
				return nil, err
			}
			if rt.polD, err = NewPolicy(dp); err != nil {
				return nil, err
			}
		}
	} else {
		if len(cfg.Workers) == 0 {
			return nil, errors.New("disagg: regular mode needs at least one worker")
		}
		for _, u := range cfg.Workers {
			w, err := mk(u, "regular", 0)
			if err != nil {
				return nil, err
			}
			rt.regular = append(rt.regular, w)
		}
		if cfg.Picker != nil {
			rt.polR = cfg.Picker
		} else if rt.polR, err = NewPolicy(cfg.Policy); err != nil {
			return nil, err
		}
	}
	rt.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dsv4_router_requests_total",
		Help: "Requests through the router, by mode and outcome (ok, client_error: a 4xx answered as it came, failed, failed_midstream, cancelled)."}, []string{"mode", "outcome"})
	rt.stage = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dsv4_router_stage_seconds",
		Help:    "Latency per stage: prefill (prefill server's answer), first_byte (from the decode or regular server), total.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"stage"})
	rt.retries = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_router_retries_total",
		Help: "Attempts retried with a new worker pair and room."})
	rt.healthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dsv4_router_worker_healthy",
		Help: "1 when the worker passes health checks."}, []string{"role", "url"})
	rt.breakers = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsv4_router_breaker_open_total",
		Help: "Times a worker's circuit breaker opened."})
	rt.inflight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "dsv4_router_inflight_requests",
		Help: "Client requests in flight."})
	rt.reg.MustRegister(rt.requests, rt.stage, rt.retries, rt.healthy, rt.breakers, rt.inflight)
	rt.vllm = newRelayMetrics(rt.reg)
	for _, w := range rt.all() {
		rt.healthy.WithLabelValues(w.Role, w.URL).Set(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt.stop = cancel
	if cfg.HealthInterval > 0 {
		rt.CheckHealth(ctx) // learn identities and bootstrap ports first
		rt.wg.Add(1)
		go rt.healthLoop(ctx)
	}
	return rt, nil
}

// Close stops the health checks.
func (rt *Router) Close() {
	rt.stop()
	rt.wg.Wait()
}

func (rt *Router) all() []*Worker {
	return slices.Concat(rt.regular, rt.prefill, rt.decode)
}

// Workers returns every worker (for status pages and tests).
func (rt *Router) Workers() []*Worker { return rt.all() }

func (rt *Router) healthLoop(ctx context.Context) {
	defer rt.wg.Done()
	t := time.NewTicker(rt.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rt.CheckHealth(ctx)
	}
}

// CheckHealth probes every worker once (GET /health, and /server_info for
// the identity in PD mode) and updates the verdicts. A prefill server whose
// identity is incompatible with every decode server's (or the reverse) is
// marked unhealthy: the pair would be refused at connect anyway.
func (rt *Router) CheckHealth(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range rt.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, reason, misconfigured := rt.probe(ctx, w)
			w.mu.Lock()
			if ok {
				w.healthFails = 0
				w.healthy, w.reason = true, ""
			} else {
				w.healthFails++
				w.reason = reason
				if w.healthFails >= rt.cfg.HealthFailures || misconfigured {
					w.healthy = false
				}
			}
			w.mu.Unlock()
		}()
	}
	wg.Wait()
	if rt.cfg.PD {
		rt.checkCompat(rt.prefill, rt.decode)
		rt.checkCompat(rt.decode, rt.prefill)
	}
	for _, w := range rt.all() {
		v := 0.0
		if w.Healthy() {
			v = 1
		}
		rt.healthy.WithLabelValues(w.Role, w.URL).Set(v)
	}
}

func (rt *Router) checkCompat(ws, peers []*Worker) {
	for _, w := range ws {
		w.mu.Lock()
		id := w.identity
		w.mu.Unlock()
		if id == nil {
			continue
		}
		known, ok := 0, false
		for _, p := range peers {
			p.mu.Lock()
			pid := p.identity
			p.mu.Unlock()
			if pid == nil {
				continue
			}
			known++
			if id.Compatible(*pid) == nil {
				ok = true
			}
		}
		if known > 0 && !ok {
			w.mu.Lock()
			w.healthy, w.reason = false, "incompatible with every peer (model identity)"
			w.mu.Unlock()
		}
	}
}

// probe checks w once: ok, or why not. misconfigured means the answer
// will not change by itself (a server of another role than w's): the
// worker is unhealthy at once, whatever HealthFailures says.
func (rt *Router) probe(ctx context.Context, w *Worker) (ok bool, reason string, misconfigured bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+path, nil)
		return rt.client.Do(req)
	}
	resp, err := get("/health")
	if err != nil {
		return false, err.Error(), false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, "health status " + resp.Status, false
	}
	if w.Role == "regular" {
		return true, "", false
	}
	resp, err = get("/server_info")
	if err != nil {
		return false, err.Error(), false
	}
	defer resp.Body.Close()
	var info struct {
		Role          string    `json:"role"`
		Identity      *Identity `json:"identity"`
		BootstrapPort int       `json:"bootstrap_port"`
	}
	if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&info) == nil {
		if info.Role != "" && info.Role != w.Role {
			// --prefill and --decode swapped, or both naming one server:
			// its requests would wait for a transfer that never comes.
			return false, fmt.Sprintf("role mismatch: configured as a %s server, /server_info says %q", w.Role, info.Role), true
		}
		w.mu.Lock()
		w.identity = info.Identity
		if w.Role == "prefill" && w.BootstrapPort == 0 {
			w.BootstrapPort = info.BootstrapPort
		}
		w.mu.Unlock()
	}
	return true, "", false
}

// report feeds a request outcome into w's circuit breaker. A success
// closes it; BreakerFailures consecutive failures open it for
// BreakerCooldown, after which it is half-open (claim lets one trial
// request through) and a failure re-opens it at once.
func (rt *Router) report(w *Worker, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok {
		w.consecFails = 0
		w.openUntil = time.Time{}
		w.trial = false
		return
	}
	now := time.Now()
	if now.Before(w.openUntil) {
		return // an older request failing while open: already counted
	}
	w.consecFails++
	if !w.openUntil.IsZero() || w.consecFails >= rt.cfg.BreakerFailures {
		w.openUntil = now.Add(rt.cfg.BreakerCooldown)
		w.consecFails = 0
		w.trial = false
		rt.breakers.Inc()
	}
}

// pick chooses among ws minus the excluded, healthy first, and, if given,
// only workers compatible with peer, and claims the worker: trial is its
// half-open trial number (0: its breaker is closed), which the caller
// gives back with endTrial when the attempt ends. A worker whose trial
// another request took between the filter and the claim is dropped and
// the policy asked again.
func (rt *Router) pick(pol Policy, ws []*Worker, exclude map[*Worker]bool, key string, peer *Worker) (w *Worker, trial uint64) {
	now := time.Now()
	var cands []*Worker
	for _, w := range ws {
		if exclude[w] || !w.available(now) || (peer != nil && !compatible(w, peer)) {
			continue
		}
		cands = append(cands, w)
	}
	for len(cands) > 0 {
		w := pol.Pick(cands, key)
		if !slices.Contains(cands, w) { // a Picker of the caller's that misbehaved
			return nil, 0
		}
		if trial, ok := w.claim(now); ok {
			return w, trial
		}
		cands = slices.DeleteFunc(slices.Clone(cands), func(c *Worker) bool { return c == w })
	}
	return nil, 0
}

func compatible(a, b *Worker) bool {
	a.mu.Lock()
	ia := a.identity
	a.mu.Unlock()
	b.mu.Lock()
	ib := b.identity
	b.mu.Unlock()
	return ia == nil || ib == nil || ia.Compatible(*ib) == nil
}

// Handler returns the router's HTTP API: POST /v1/chat/completions (and, in
// regular mode, /v1/completions and GET /version, from the first healthy
// worker that answers it; PD mode answers them 404 with an OpenAI error
// object, code "unsupported_endpoint"), vLLM's POST /tokenize and
// /detokenize (forwarded like completions: in regular mode to a worker, in
// PD mode to a healthy decode server, which tokenizes as examples/server
// does), GET /health, /v1/models (OpenAI list: from the first healthy
// worker that answers it, else from the workers' reported model names or
// RouterConfig.ModelName), /v1/models/{id} (likewise: a worker's answer,
// its 404 model_not_found included, else the router's own list),
// /workers (status) and /metrics (the dsv4_router_* series, and vLLM's
// vllm:* series of what the router forwards: relayMetrics). Other paths
// get a 404 OpenAI error object.
func (rt *Router) Handler() http.Handler {
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.Handler { return openaierr.BearerAuth(rt.cfg.APIKey, h) }
	mux.Handle("/v1/chat/completions", auth(rt.serveGenerate))
	mux.Handle("/v1/completions", auth(rt.serveGenerate))
	mux.Handle("/tokenize", auth(rt.serveGenerate))
	mux.Handle("/detokenize", auth(rt.serveGenerate))
	mux.HandleFunc("/version", rt.version)
	mux.Handle("/v1/models/{id...}", auth(rt.model))
	health := func(w http.ResponseWriter, r *http.Request) {
		if rt.anyAvailable() {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "no_workers", "no healthy workers")
	}
	mux.HandleFunc("/health", health)
	mux.HandleFunc("/ping", health) // vLLM: /ping is /health (SageMaker)
	mux.Handle("/v1/models", auth(rt.models))
	mux.Handle("/workers", auth(func(w http.ResponseWriter, r *http.Request) {
		// healthy is whether the router sends the worker requests now: the
		// last health check passed and its circuit breaker is closed (a
		// worker just killed fails requests before its next health check:
		// the breaker opens first). reason says which verdict is false.
		type st struct {
			URL      string `json:"url"`
			Role     string `json:"role"`
			Healthy  bool   `json:"healthy"`
			Reason   string `json:"reason,omitempty"`
			InFlight int64  `json:"inflight"`
			Breaker  bool   `json:"breaker_open"`
			// BreakerState: "closed", "open", or "half_open" (after
			// BreakerCooldown: one trial request at a time).
			BreakerState string `json:"breaker_state"`
		}
		var out []st
		now := time.Now()
		for _, wk := range rt.all() {
			wk.mu.Lock()
			open := now.Before(wk.openUntil)
			state := "closed"
			if open {
				state = "open"
			} else if !wk.openUntil.IsZero() {
				state = "half_open"
			}
			reason := wk.reason
			if open && wk.healthy {
				reason = "circuit breaker open: consecutive request failures"
			} else if wk.blocked(now) && wk.healthy {
				reason = "circuit breaker half-open: its one trial request is out"
			}
			out = append(out, st{wk.URL, wk.Role, wk.healthy && !wk.blocked(now), reason, wk.InFlight(), open, state})
			wk.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, out)
	}))
	mux.Handle("/metrics", promhttp.HandlerFor(rt.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", notFound)
	return mux
}

func (rt *Router) anyAvailable() bool {
	now := time.Now()
	if !rt.cfg.PD {
		return slices.ContainsFunc(rt.regular, func(w *Worker) bool { return w.available(now) })
	}
	return slices.ContainsFunc(rt.prefill, func(w *Worker) bool { return w.available(now) }) &&
		slices.ContainsFunc(rt.decode, func(w *Worker) bool { return w.available(now) })
}

// getOnly answers a method other than GET or HEAD with 405 (false).
func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use GET")
	return false
}

// relayGet sends GET path (with the client's Authorization) to the healthy
// workers that serve the OpenAI surface (regular, or decode in PD mode) in
// turn and relays the first answer that accept takes (status, body); false
// when none did.
func (rt *Router) relayGet(w http.ResponseWriter, r *http.Request, path string, accept func(int, []byte) bool) bool {
	ws := rt.regular
	if rt.cfg.PD {
		ws = rt.decode
	}
	for _, wk := range ws {
		if !wk.Healthy() {
			continue
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, wk.URL+path, nil)
		rt.setAuth(req, r)
		resp, err := rt.client.Do(req)
		if err != nil {
			cancel()
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		if err != nil || !accept(resp.StatusCode, b) {
			continue
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
		return true
	}
	return false
}

// jsonField reports whether body is a JSON object whose field key is the
// string want.
func jsonField(body []byte, key, want string) bool {
	var m map[string]json.RawMessage
	var v string
	return json.Unmarshal(body, &m) == nil && json.Unmarshal(m[key], &v) == nil && v == want
}

func (rt *Router) models(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	if rt.relayGet(w, r, "/v1/models", func(status int, b []byte) bool {
		// not e.g. a worker without /v1/models: then answer from our own view
		return status == http.StatusOK && jsonField(b, "object", "list")
	}) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, modelList(rt.modelNames(), rt.started, 0))
}

// model answers GET /v1/models/{id}: a worker's answer (the model object,
// or its 404 model_not_found, which honours the worker's aliases), else
// the entry of the router's own list or 404 model_not_found.
func (rt *Router) model(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	id := r.PathValue("id")
	if rt.relayGet(w, r, "/v1/models/"+url.PathEscape(id), func(status int, b []byte) bool {
		if status == http.StatusNotFound {
			return errorCode(b) == "model_not_found"
		}
		return status == http.StatusOK && jsonField(b, "object", "model")
	}) {
		return
	}
	names := rt.modelNames()
	if !slices.Contains(names, id) {
		openaierr.ModelNotFound(id, names[0]).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, modelObject(id, rt.started, 0))
}

// version answers GET /version (regular mode) from the first healthy
// worker that answers it.
func (rt *Router) version(w http.ResponseWriter, r *http.Request) {
	if rt.cfg.PD {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unsupported_endpoint",
			r.URL.Path+" is not supported in PD mode")
		return
	}
	if !getOnly(w, r) {
		return
	}
	if !rt.relayGet(w, r, "/version", func(status int, b []byte) bool {
		return status == http.StatusOK && json.Valid(b)
	}) {
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "no_workers", "no healthy worker answered /version")
	}
}

// modelNames are the names the router reports when no worker answers
// /v1/models: RouterConfig.ModelName, else the workers' served names, else
// "dsv4".
func (rt *Router) modelNames() []string {
	var names []string
	for _, wk := range rt.all() {
		wk.mu.Lock()
		if wk.identity != nil && wk.identity.Model != "" && !slices.Contains(names, wk.identity.Model) {
			names = append(names, wk.identity.Model)
		}
		wk.mu.Unlock()
	}
	if rt.cfg.ModelName != "" {
		names = []string{rt.cfg.ModelName}
	} else if len(names) == 0 {
		names = []string{"dsv4"}
	}
	return names
}

// routerOwned are the request fields the router sets or removes.
var routerOwned = []string{"bootstrap_host", "bootstrap_port", "bootstrap_room", "kv_transfer_params"}

// cacheKey is the text the cache-aware policy indexes: the messages' (or
// prompt's) raw JSON, which shares prefixes exactly when the prompts do.
func cacheKey(raw map[string]json.RawMessage) string {
	if m, ok := raw["messages"]; ok {
		return string(m)
	}
	return string(raw["prompt"])
}

// patch returns body with the router-owned fields (and drop) removed and
// set merged in. Other fields keep their raw bytes.
func patch(raw map[string]json.RawMessage, set map[string]any, drop ...string) []byte {
	out := make(map[string]json.RawMessage, len(raw)+len(set))
	for k, v := range raw {
		if !slices.Contains(routerOwned, k) && !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	for k, v := range set {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	b, _ := json.Marshal(out)
	return b
}

// errRetry marks an attempt failure that happened before any byte reached
// the client.
type attemptErr struct {
	status int
	body   []byte
	err    error
	blame  *Worker
	// noWorker: no worker was left to try (the previous attempt's error,
	// if any, is the one to answer).
	noWorker bool
}

// writeUpstreamError answers a worker's error (status, body) to the
// client: as it is when body is an OpenAI error object, else (a proxy's
// HTML page, plain text, an empty body) as one with the worker's status,
// code "upstream_error" and the start of the body in the message, so that
// every error the client gets is OpenAI's JSON. A status below 400 (a
// decode server's redirect, say, which the router does not follow) is
// answered 502.
func writeUpstreamError(w http.ResponseWriter, status int, body []byte) {
	if status < 400 {
		status = http.StatusBadGateway
	}
	var e struct {
		Error *struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
		return
	}
	typ := "internal_error"
	if status < 500 {
		typ = "invalid_request_error"
	}
	msg := fmt.Sprintf("worker answered %d %s", status, http.StatusText(status))
	if b := strings.TrimSpace(string(body)); b != "" {
		if len(b) > 200 {
			b = strings.ToValidUTF8(b[:200], "") + "…"
		}
		msg += ": " + b
	}
	writeError(w, status, typ, "upstream_error", msg)
}

func (rt *Router) serveGenerate(w http.ResponseWriter, r *http.Request) {
	// In PD mode, /tokenize and /detokenize go to a decode server (it
	// tokenizes as examples/server does); /v1/completions is not served.
	utility := r.URL.Path == "/tokenize" || r.URL.Path == "/detokenize"
	if rt.cfg.PD && r.URL.Path != "/v1/chat/completions" && !utility {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unsupported_endpoint",
			r.URL.Path+" is not supported in PD mode: use /v1/chat/completions")
		return
	}
	_, raw, ok := readJSONObject(w, r, rt.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	rt.inflight.Inc()
	defer rt.inflight.Dec()
	mode := "regular"
	if rt.cfg.PD {
		mode = "pd"
	}
	t0 := time.Now()
	key := cacheKey(raw)
	tried := map[*Worker]bool{}
	var last *attemptErr
	if !utility { // measured as vLLM measures generation (relayMetrics)
		watch := newRelayWatch(w, rt.vllm, t0, raw)
		w = watch
		defer func() {
			cut := last != nil && last.status == -1
			watch.done(cut, cut && r.Context().Err() != nil)
		}()
	}
	for attempt := 0; attempt < rt.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			rt.retries.Inc()
		}
		var ae *attemptErr
		switch {
		case rt.cfg.PD && utility:
			ae = rt.attemptOne(w, r, raw, key, tried, t0, rt.polD, rt.decode)
		case rt.cfg.PD:
			ae = rt.attemptPD(w, r, raw, key, tried, t0)
		default:
			ae = rt.attemptOne(w, r, raw, key, tried, t0, rt.polR, rt.regular)
		}
		if ae != nil && ae.noWorker && last != nil {
			break // every worker tried: the client gets the last one's answer
		}
		last = ae
		if ae == nil {
			rt.requests.WithLabelValues(mode, "ok").Inc()
			rt.stage.WithLabelValues("total").Observe(time.Since(t0).Seconds())
			return
		}
		if r.Context().Err() != nil {
			rt.requests.WithLabelValues(mode, "cancelled").Inc()
			return
		}
		if ae.status == -1 { // bytes already sent: cannot retry
			rt.requests.WithLabelValues(mode, "failed_midstream").Inc()
			return
		}
		if clientError(ae.status) {
			break // the request itself is bad: same answer everywhere
		}
	}
	if last != nil && clientError(last.status) {
		rt.requests.WithLabelValues(mode, "client_error").Inc()
	} else {
		rt.requests.WithLabelValues(mode, "failed").Inc()
	}
	switch {
	case last == nil:
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "no_workers", "no healthy workers")
	case last.body != nil:
		writeUpstreamError(w, last.status, last.body)
	default:
		msg := "no healthy workers"
		if last.err != nil {
			msg = last.err.Error()
		}
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "upstream_failed", msg)
	}
}

// send POSTs body to wk's path for the client request in, with the Bearer
// key that setAuth chooses.
func (rt *Router) send(ctx context.Context, in *http.Request, wk *Worker, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	rt.setAuth(req, in)
	return rt.client.Do(req)
}

// setAuth gives out, a request to a worker made for the client request in,
// RouterConfig.WorkerAPIKey as its Bearer key, or else in's Authorization
// header (if any).
func (rt *Router) setAuth(out, in *http.Request) {
	if rt.cfg.WorkerAPIKey != "" {
		out.Header.Set("Authorization", "Bearer "+rt.cfg.WorkerAPIKey)
	} else if a := in.Header.Get("Authorization"); a != "" {
		out.Header.Set("Authorization", a)
	}
}

// attemptOne runs one attempt of a request that one worker answers whole:
// any request in regular mode, /tokenize and /detokenize on a decode server
// in PD mode. The worker is pol's pick among the healthy ws not yet tried;
// the body goes as the client sent it (router-owned fields removed), with
// setAuth's key, and the answer is relayed as the worker gave it.
func (rt *Router) attemptOne(w http.ResponseWriter, r *http.Request, raw map[string]json.RawMessage, key string, tried map[*Worker]bool, t0 time.Time, pol Policy, ws []*Worker) *attemptErr {
	wk, trial := rt.pick(pol, ws, tried, key, nil)
	if wk == nil {
		return &attemptErr{status: http.StatusServiceUnavailable, err: errors.New("no healthy workers left"), noWorker: true}
	}
	defer wk.endTrial(trial)
	tried[wk] = true
	wk.inflight.Add(1)
	defer wk.inflight.Add(-1)
	resp, err := rt.send(r.Context(), r, wk, r.URL.Path, patch(raw, nil))
	if err != nil {
		if r.Context().Err() != nil {
			return clientGone(r)
		}
		rt.report(wk, false)
		return &attemptErr{status: http.StatusBadGateway, err: err, blame: wk}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		rt.report(wk, resp.StatusCode < 500)
		ae := &attemptErr{status: resp.StatusCode, body: b}
		if resp.StatusCode >= 500 {
			ae.blame = wk
		}
		return ae
	}
	rt.report(wk, true)
	rt.stage.WithLabelValues("first_byte").Observe(time.Since(t0).Seconds())
	if sent, err := relay(w, resp); err != nil {
		if !sent && r.Context().Err() == nil {
			rt.report(wk, false)
			return &attemptErr{status: http.StatusBadGateway, err: fmt.Errorf("worker %s failed before answering: %w", wk.URL, err), blame: wk}
		}
		return &attemptErr{status: -1, err: err}
	}
	return nil
}

// attemptPD runs one attempt of a PD request: a new pair and a new room.
func (rt *Router) attemptPD(w http.ResponseWriter, r *http.Request, raw map[string]json.RawMessage, key string, tried map[*Worker]bool, t0 time.Time) *attemptErr {
	p, ptrial := rt.pick(rt.polP, rt.prefill, tried, key, nil)
	if p == nil {
		p, ptrial = rt.pick(rt.polP, rt.prefill, nil, key, nil) // all tried: allow reuse
	}
	if p == nil {
		return &attemptErr{status: http.StatusServiceUnavailable, err: errors.New("no healthy prefill server"), noWorker: true}
	}
	defer p.endTrial(ptrial)
	d, dtrial := rt.pick(rt.polD, rt.decode, tried, key, p)
	if d == nil {
		d, dtrial = rt.pick(rt.polD, rt.decode, nil, key, p)
	}
	if d == nil {
		return &attemptErr{status: http.StatusServiceUnavailable, err: errors.New("no healthy decode server compatible with the prefill server"), noWorker: true}
	}
	defer d.endTrial(dtrial)
	p.inflight.Add(1)
	d.inflight.Add(1)
	defer p.inflight.Add(-1)
	defer d.inflight.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	p.mu.Lock()
	port := p.BootstrapPort
	p.mu.Unlock()
	bs := Bootstrap{Host: p.host, Port: port, Room: randomRoom()}

	pch := make(chan pres, 1)
	var dBody []byte
	decodeOK := false // the decode server answered 200
	if rt.cfg.Sequential {
		pb := patch(raw, map[string]any{"stream": false}, "stream_options")
		resp, err := rt.send(ctx, r, p, "/v1/chat/completions", pb)
		if err != nil {
			if r.Context().Err() != nil {
				return clientGone(r)
			}
			rt.report(p, false)
			tried[p] = true
			return &attemptErr{status: http.StatusBadGateway, err: err, blame: p}
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		rt.stage.WithLabelValues("prefill").Observe(time.Since(t0).Seconds())
		if resp.StatusCode != http.StatusOK {
			if r.Context().Err() != nil {
				return clientGone(r)
			}
			if poolFull(resp.StatusCode, b) {
				// Full, not failing: another prefill server may take it;
				// the breaker is left alone.
				tried[p] = true
				return &attemptErr{status: resp.StatusCode, body: b}
			}
			if resp.StatusCode >= 500 {
				rt.report(p, false)
				tried[p] = true
			}
			return &attemptErr{status: resp.StatusCode, body: b, blame: p}
		}
		rt.report(p, true)
		var desc struct {
			KV json.RawMessage `json:"kv_transfer_params"`
		}
		if json.Unmarshal(b, &desc) != nil || desc.KV == nil {
			return &attemptErr{status: http.StatusBadGateway, err: errors.New("prefill answer without kv_transfer_params"), blame: p}
		}
		var kv struct {
			Room *uint64 `json:"bootstrap_room"`
		}
		if json.Unmarshal(desc.KV, &kv) == nil && kv.Room != nil {
			// The parked state is released unless the decode server
			// answers 200 (then it fetched the state, or will abort it).
			release := rt.releaser(r, p, *kv.Room)
			defer func() {
				if !decodeOK {
					release()
				}
			}()
		}
		dBody = patch(raw, map[string]any{"kv_transfer_params": desc.KV})
		pch <- pres{status: 200, body: b, at: time.Now()}
	} else {
		dBody = patch(raw, map[string]any{"bootstrap_host": bs.Host, "bootstrap_port": bs.Port, "bootstrap_room": bs.Room})
		go func() {
			resp, err := rt.send(ctx, r, p, "/v1/chat/completions", dBody)
			if err != nil {
				pch <- pres{err: err, at: time.Now()}
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			pch <- pres{status: resp.StatusCode, body: b, at: time.Now()}
		}()
	}
	type dres struct {
		resp *http.Response
		err  error
	}
	dch := make(chan dres, 1)
	go func() {
		resp, err := rt.send(ctx, r, d, "/v1/chat/completions", dBody)
		dch <- dres{resp, err}
	}()
	var dr dres
	select {
	case dr = <-dch:
	case pr := <-pch:
		if clientError(pr.status) {
			// The prefill server refused the request itself (e.g. 400
			// context_length_exceeded): the same answer everywhere, so
			// the client gets it now, nobody is blamed and the decode
			// leg is cancelled.
			cancel()
			if x := <-dch; x.resp != nil {
				x.resp.Body.Close()
			}
			return &attemptErr{status: pr.status, body: pr.body}
		}
		pch <- pr // not decisive: keep it for the decode leg's outcome
		dr = <-dch
	}
	resp, err := dr.resp, dr.err
	if err != nil {
		cancel()
		pr := <-pch
		if clientError(pr.status) {
			return &attemptErr{status: pr.status, body: pr.body}
		}
		if r.Context().Err() != nil {
			return clientGone(r)
		}
		rt.report(d, false)
		tried[d] = true
		return &attemptErr{status: http.StatusBadGateway, err: err, blame: d}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var pr pres
		got := false
		if transferFailure(b) {
			// The prefill leg answers when its room ends, which a failed
			// transfer just did: its answer says why (a full prefill
			// server's 503 kv_pool_full), so it gets a moment before the
			// leg is cancelled (500 ms: a room still parked, as when the
			// decode server could not reach the bootstrap port, would
			// answer only at its lease).
			select {
			case pr = <-pch:
				got = true
			case <-time.After(500 * time.Millisecond):
			}
		}
		cancel()
		if !got {
			pr = <-pch
		}
		if resp.StatusCode >= 500 && clientError(pr.status) {
			// The decode side failed because the prefill side refused
			// the request: the client's error, not a worker's.
			return &attemptErr{status: pr.status, body: pr.body}
		}
		if poolFull(pr.status, pr.body) {
			// The prefill server was full and failed the room: another
			// one may take the request; nobody's breaker counts it.
			tried[p] = true
			return &attemptErr{status: pr.status, body: pr.body}
		}
		// A transfer failure is the prefill side's: the decode server says
		// so (its transfer error codes), or the prefill leg failed on its
		// own. A prefill leg that failed only because the router cancelled
		// it (above) does not count: a decode server failing at once would
		// otherwise open the prefill servers' breakers instead of its own.
		if r.Context().Err() != nil {
			return clientGone(r)
		}
		blame := d
		cancelledHere := errors.Is(pr.err, context.Canceled)
		if transferFailure(b) || (pr.err != nil && !cancelledHere) || pr.status >= 500 {
			blame = p
		}
		if resp.StatusCode >= 500 {
			rt.report(blame, false)
			tried[blame] = true
			if errorCode(b) == "transfer_mismatch" {
				// The pair disagrees on the request: the prefill server
				// made the state (blamed), but the retry takes another
				// decode server too where there is one, in case this one
				// is the odd one out.
				tried[d] = true
			}
		}
		return &attemptErr{status: resp.StatusCode, body: b, blame: blame}
	}
	decodeOK = true
	rt.report(d, true)
	rt.stage.WithLabelValues("first_byte").Observe(time.Since(t0).Seconds())
	var rerr error
	var pr *pres
	sent := true
	if isJSON(resp) {
		pr, sent, rerr = relayMerged(w, resp, pch)
	} else {
		sent, rerr = relay(w, resp)
		select {
		case x := <-pch:
			pr = &x
		default:
		}
	}
	if rerr != nil && !sent && r.Context().Err() == nil {
		// The decode server failed before the client got anything: another
		// pair may answer.
		rt.report(d, false)
		tried[d] = true
		return &attemptErr{status: http.StatusBadGateway, err: fmt.Errorf("decode server %s failed before answering: %w", d.URL, rerr), blame: d}
	}
	if pr != nil && pr.err == nil && pr.status == http.StatusOK {
		rt.report(p, true)
		rt.stage.WithLabelValues("prefill").Observe(pr.at.Sub(t0).Seconds())
	}
	if rerr != nil {
		return &attemptErr{status: -1, err: rerr}
	}
	return nil
}

// poolFull reports a prefill server's 503 kv_pool_full (ErrPoolFull): it
// holds as many parked states as it may.
func poolFull(status int, body []byte) bool {
	return status == http.StatusServiceUnavailable && errorCode(body) == "kv_pool_full"
}

// releaser returns a function that asks prefill server p to drop the
// state parked in room (POST /abort_request, with setAuth's key for the
// client request in) in the background, within 2 s. Sequential mode calls
// it when the decode leg did not answer 200 (the decode server
// unreachable or failing, the client gone between the legs): nobody will
// fetch the state, which held the prefill server's memory and one of its
// PrefillConfig.MaxParkedStates until its lease (30 s by default) ended,
// once per attempt.
func (rt *Router) releaser(in *http.Request, p *Worker, room uint64) func() {
	body, _ := json.Marshal(map[string]uint64{"bootstrap_room": room})
	auth := &http.Request{Header: http.Header{}} // the key, read from in now
	rt.setAuth(auth, in)
	return func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/abort_request", bytes.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if a := auth.Header.Get("Authorization"); a != "" {
				req.Header.Set("Authorization", a)
			}
			resp, err := rt.client.Do(req)
			if err == nil {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
			}
		}()
	}
}

// clientGone is the outcome of an attempt whose client went away: no
// worker is blamed. A client hanging up used to count as a failure of the
// worker its request was on, so that three cancelled requests (a user
// stopping generation) opened a healthy worker's circuit breaker.
func clientGone(r *http.Request) *attemptErr {
	return &attemptErr{status: 499, err: r.Context().Err()}
}

// transferFailure reports whether body is a decode server's error for a
// state it could not get from the prefill server, or got in disagreement
// with the request (apiError's codes transfer_failed, transfer_aborted,
// transfer_timeout, transfer_mismatch, incompatible_peer).
func transferFailure(body []byte) bool {
	switch errorCode(body) {
	case "transfer_failed", "transfer_aborted", "transfer_timeout", "transfer_mismatch", "incompatible_peer":
		return true
	}
	return false
}

// errorCode is the code of an OpenAI error object body ("" if none).
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// clientError reports an HTTP status that means "the request itself is bad":
// a 4xx other than 499 (cancelled) and 409 (room id collision), which are
// answered to the client as they are, never retried and never counted
// against a worker's circuit breaker or health.
func clientError(status int) bool {
	return status >= 400 && status < 500 && status != 499 && status != http.StatusConflict
}

func isJSON(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
}

func copyHeader(dst, src http.Header) {
	for _, k := range []string{"Content-Type", "Cache-Control", "X-Accel-Buffering"} {
		if v := src.Get(k); v != "" {
			dst.Set(k, v)
		}
	}
}

// relay streams resp to w as it comes, flushing after every read. It
// sends nothing, not even the status, before the first body byte (or the
// end of an empty body), and holds a JSON body back until its end (up to
// MaxBodyBytes; a longer one is streamed from there on), so that a worker
// that fails before that leaves the client untouched: sent is false and
// the caller may retry. An event stream that breaks after the client got
// part of it ends with an OpenAI error event and [DONE], as the servers
// end a stream that fails while it generates (a bare end of stream reads
// as a complete answer to OpenAI's clients).
func relay(w http.ResponseWriter, resp *http.Response) (sent bool, err error) {
	rc := http.NewResponseController(w)
	hold := isJSON(resp)
	var held []byte
	var tail []byte // the last bytes sent (at most 2)
	write := func(b []byte) error {
		if !sent {
			copyHeader(w.Header(), resp.Header)
			if hold {
				w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			}
			w.WriteHeader(resp.StatusCode)
			sent = true
		}
		if len(b) == 0 {
			return nil
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		tail = append(tail, b[max(len(b)-2, 0):]...)
		tail = tail[max(len(tail)-2, 0):]
		_ = rc.Flush()
		return nil
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if hold && len(held)+n <= MaxBodyBytes {
				held = append(held, buf[:n]...)
			} else {
				if hold {
					hold = false
					if werr := write(held); werr != nil {
						return sent, werr
					}
				}
				if werr := write(buf[:n]); werr != nil {
					return sent, werr
				}
			}
		}
		if err == io.EOF {
			return true, write(held)
		}
		if err != nil {
			if sent && !errors.Is(err, context.Canceled) && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				end := "\n\n" // close a cut event first
				if t := string(tail); strings.HasSuffix(t, "\n\n") {
					end = ""
				} else if strings.HasSuffix(t, "\n") {
					end = "\n"
				}
				b, _ := openaiwire.Marshal(map[string]openaiwire.Error{"error": {Message: "the worker's stream broke: " + err.Error(),
					Type: "internal_error", Code: "upstream_failed"}})
				_, _ = io.WriteString(w, end+"data: "+string(b)+"\n\ndata: [DONE]\n\n")
				_ = rc.Flush()
			}
			return sent, err
		}
	}
}

// pres is the prefill leg's outcome.
type pres struct {
	status int
	body   []byte
	err    error
	at     time.Time
}

// relayMerged forwards a non-streaming decode answer with the prefill
// server's usage merged in: its usage.prompt_tokens_details (cached tokens,
// SGLang's convention) replaces the decode side's when the prefill side
// reports one. The decode answer's other bytes pass unchanged.
//
// The answer is read whole before anything is sent: when that fails, sent
// is false (the client got nothing).
func relayMerged(w http.ResponseWriter, resp *http.Response, pch <-chan pres) (pr *pres, sent bool, err error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	if err != nil {
		return nil, false, err
	}
	select {
	case x := <-pch:
		pr = &x
	case <-time.After(time.Second):
	}
	if pr != nil && pr.status == http.StatusOK {
		b = mergeUsage(b, pr.body)
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(resp.StatusCode)
	_, err = w.Write(b)
	return pr, true, err
}

func mergeUsage(dec, pre []byte) []byte {
	var p struct {
		Usage struct {
			Details json.RawMessage `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(pre, &p) != nil || p.Usage.Details == nil {
		return dec
	}
	var d map[string]json.RawMessage
	var u map[string]json.RawMessage
	if json.Unmarshal(dec, &d) != nil || json.Unmarshal(d["usage"], &u) != nil || u == nil {
		return dec
	}
	u["prompt_tokens_details"] = p.Usage.Details
	d["usage"], _ = openaiwire.Marshal(u)
	out, err := openaiwire.Marshal(d)
	if err != nil {
		return dec
	}
	return append(out, '\n')
}
