package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
	"github.com/dsv4go/dsv4go/internal/tokenizeapi"
)

// Server is the OpenAI-compatible HTTP front end of one dsv4.Engine.
type Server struct {
	eng          *dsv4.Engine
	modelName    string
	aliases      map[string]bool // names accepted in "model" besides modelName
	apiKey       string
	maxBodyBytes int64
	maxTokens    int // upper limit of max_tokens below the context (0: the context, checked by the engine with the prompt)
	log          *slog.Logger
	logRequests  bool // one INFO line per generation request
	// promptDetails: usage carries prompt_tokens_details
	// (ServerConfig.EnablePromptTokensDetails)
	promptDetails bool
	created       int64
	draining      atomic.Bool

	reg *prometheus.Registry
	m   *metrics
	tok *tokenizeapi.API // /tokenize and /detokenize
}

// ServerConfig configures NewServer.
type ServerConfig struct {
	ModelName    string   // served model name (the "id" of /v1/models)
	Aliases      []string // other accepted names (e.g. the model path)
	APIKey       string   // "" disables authentication
	MaxBodyBytes int64    // request body limit; default 8 MiB
	MaxTokens    int      // limit of max_tokens; default the context length
	Logger       *slog.Logger
	// DisableLogRequests turns off the per-request log line (vLLM's
	// --disable-log-requests): by default each chat and completions
	// request, once finished, is logged at INFO on Logger (see logged).
	DisableLogRequests bool
	// EnablePromptTokensDetails adds usage.prompt_tokens_details
	// {"cached_tokens": N} to chat and completions responses (the usage of
	// non-streaming answers and the streamed usage chunk) when N > 0, the
	// prompt tokens the engine's prefix cache restored: vLLM's
	// --enable-prompt-tokens-details, off by default there too, and like
	// vLLM the field is left out when N is 0.
	EnablePromptTokensDetails bool
}

// NewServer wraps eng.
func NewServer(eng *dsv4.Engine, cfg ServerConfig) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		eng: eng, modelName: cfg.ModelName, apiKey: cfg.APIKey,
		maxBodyBytes: cfg.MaxBodyBytes, maxTokens: cfg.MaxTokens, log: cfg.Logger,
		created: time.Now().Unix(), aliases: map[string]bool{}, logRequests: !cfg.DisableLogRequests,
		promptDetails: cfg.EnablePromptTokensDetails, reg: prometheus.NewRegistry(),
	}
	for _, a := range cfg.Aliases {
		s.aliases[a] = true
	}
	if s.maxTokens >= eng.MaxContext() {
		s.maxTokens = 0 // the context bounds it: the engine's ContextLengthError
	}
	s.m = newMetrics(s.reg, eng, cfg.ModelName)
	s.tok = s.tokenizeAPI()
	return s
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.logged(s.auth(s.post(s.chatCompletions))))
	mux.HandleFunc("/v1/completions", s.logged(s.auth(s.post(s.completions))))
	mux.HandleFunc("/v1/models", s.auth(s.models))
	mux.HandleFunc("/v1/models/{id...}", s.auth(s.model))
	mux.HandleFunc("/tokenize", s.auth(s.post(s.tokenize)))
	mux.HandleFunc("/detokenize", s.auth(s.post(s.detokenize)))
	mux.HandleFunc("/version", s.version)
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/ping", s.health) // vLLM (api_server.py): SageMaker's health check, GET or POST, answered as /health
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		openaierr.NoRoute(r).Write(w)
	})
	return mux
}

// Drain makes /health report 503 and new generation requests fail with
// 503, ahead of http.Server.Shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	(&openaierr.Error{Status: status, Type: typ, Param: param, Code: code, Message: msg}).Write(w)
}

// writeEngineError answers an engine error as openaierr.FromEngine maps it,
// logging the ones that become 500.
func (s *Server) writeEngineError(w http.ResponseWriter, err error) {
	e := openaierr.FromEngine(err)
	if e.Status == http.StatusInternalServerError {
		s.log.Error("request failed", "err", err)
	}
	e.Write(w)
}

// auth guards h with the server's API key (openaierr.BearerAuth: 401
// invalid_api_key, as vLLM's --api-key); no key, no guard.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return openaierr.BearerAuth(s.apiKey, h).ServeHTTP
}

// post checks the method, drains, and reads the body within the limit.
func (s *Server) post(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "use POST")
			return
		}
		if s.draining.Load() {
			writeError(w, http.StatusServiceUnavailable, "service_unavailable", "", "shutting_down", "server is shutting down")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBodyBytes))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large",
					fmt.Sprintf("request body over %d bytes", s.maxBodyBytes))
				return
			}
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "reading body: "+err.Error())
			return
		}
		h(w, r, body)
	}
}

// decodeJSON decodes body into v with OpenAI-style errors (unknown fields
// are ignored; openaierr.Decode).
func decodeJSON(w http.ResponseWriter, body []byte, v any) bool {
	if e := openaierr.Decode(body, v); e != nil {
		e.Write(w)
		return false
	}
	return true
}

func (s *Server) checkModel(w http.ResponseWriter, model string) bool {
	if model == "" || model == s.modelName || s.aliases[model] {
		return true
	}
	openaierr.ModelNotFound(model, s.modelName).Write(w)
	return false
}

func (s *Server) checkMaxTokens(w http.ResponseWriter, vals map[string]*int) bool {
	for name, v := range vals {
		if e := openaierr.MaxTokens(name, v, s.maxTokens); e != nil {
			e.Write(w)
			return false
		}
	}
	return true
}

// chatChunkJSON is one chat.completion.chunk.
type chatChunkJSON struct {
	ID      string                   `json:"id"`
	Object  string                   `json:"object"`
	Created int64                    `json:"created"`
	Model   string                   `json:"model"`
	Choices []openaiwire.ChunkChoice `json:"choices"`
}

type chatChunkUsageJSON struct {
	chatChunkJSON
	Usage *dsv4.Usage `json:"usage"`
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, body []byte) {
	var req dsv4.ChatRequest
	rec := requestRecord(r)
	ok := decodeJSON(w, body, &req)
	rec.model = req.Model
	if !ok || !s.checkModel(w, req.Model) {
		s.m.errors.WithLabelValues("chat", "400").Inc()
		return
	}
	if !s.checkMaxTokens(w, map[string]*int{"max_tokens": req.MaxTokens, "max_completion_tokens": req.MaxCompletionTokens}) {
		return
	}
	t0 := time.Now()
	stream, err := s.eng.ChatStream(r.Context(), &req)
	if err != nil {
		s.m.errors.WithLabelValues("chat", "engine").Inc()
		s.writeEngineError(w, err)
		return
	}
	id, created := openaiwire.NewID("chatcmpl-"), time.Now().Unix()
	rec.id = id
	obs := s.m.observer(r.Context(), t0)
	obs.rec = rec
	if !req.Stream {
		var acc dsv4.ChatAccumulator
		for ch, err := range stream {
			if err != nil {
				obs.cut(r.Context())
				s.writeEngineError(w, err)
				return
			}
			obs.chunk(ch)
			acc.Add(ch)
		}
		resp := acc.Response()
		obs.done(resp.Usage, resp.Choices)
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, openaiwire.ChatResponse{
			ID: id, Object: "chat.completion", Created: created, Model: s.modelName,
			Choices: resp.Choices, Usage: *s.usage(&resp.Usage), PromptLogprobs: resp.PromptLogprobs,
		})
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.sse(w, r, stream, obs, func(ch *dsv4.ChatChunk) any {
		base := chatChunkJSON{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.modelName}
		if ch.Usage != nil {
			if !includeUsage {
				return nil
			}
			base.Choices = []openaiwire.ChunkChoice{}
			return chatChunkUsageJSON{base, s.usage(ch.Usage)}
		}
		base.Choices = []openaiwire.ChunkChoice{openaiwire.NewChunkChoice(ch)}
		if includeUsage {
			var u *dsv4.Usage
			if req.StreamOptions.Continuous() {
				u = ch.RunningUsage // vLLM's continuous_usage_stats
			}
			return chatChunkUsageJSON{base, u}
		}
		return base
	})
}

// usage is u as responses report it: without prompt_tokens_details unless
// ServerConfig.EnablePromptTokensDetails (u itself is not changed).
func (s *Server) usage(u *dsv4.Usage) *dsv4.Usage {
	if u == nil || s.promptDetails || u.PromptTokensDetails == nil {
		return u
	}
	c := *u
	c.PromptTokensDetails = nil
	return &c
}

// sse streams chunks as server-sent events, ending with "data: [DONE]".
// A write error (client gone) stops the stream, which frees its state.
func (s *Server) sse(w http.ResponseWriter, r *http.Request, stream iter.Seq2[*dsv4.ChatChunk, error], obs *observer, render func(*dsv4.ChatChunk) any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf []byte
	write := func(v any) bool {
		buf = append(buf[:0], "data: "...)
		b, err := openaiwire.Marshal(v)
		if err != nil {
			return false
		}
		buf = append(buf, b...)
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	var usage dsv4.Usage
	var finishes []string
	for ch, err := range stream {
		if err != nil {
			if r.Context().Err() == nil {
				e := openaiwire.Error{Message: err.Error(), Type: "internal_error"}
				if errors.Is(err, dsv4.ErrEngineClosed) {
					e.Type, e.Code = "service_unavailable", "shutting_down"
				}
				write(map[string]openaiwire.Error{"error": e})
			}
			obs.failed(r.Context())
			return
		}
		obs.chunk(ch)
		if ch.Usage != nil {
			usage = *ch.Usage
		}
		if ch.FinishReason != "" {
			finishes = append(finishes, ch.FinishReason)
		}
		v := render(ch)
		if v == nil {
			continue
		}
		if !write(v) {
			obs.vllm.End("abort") // the client is gone
			obs.failed(r.Context())
			return // the stream's iterator stops: the engine frees the state
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
	obs.doneReasons(usage, finishes)
}

// completion JSON shapes
type completionChoiceJSON struct {
	Index        int                      `json:"index"`
	Text         string                   `json:"text"`
	Logprobs     *dsv4.CompletionLogprobs `json:"logprobs"`
	FinishReason *string                  `json:"finish_reason"`
	MatchedStop  any                      `json:"matched_stop,omitempty"`
	// StopReason is vLLM's stop_reason (dsv4.ChatChoice.StopReason): null
	// until the choice's last chunk, as vLLM writes completion chunks.
	StopReason any `json:"stop_reason"`
	// PromptLogprobs: vLLM's per-choice prompt_logprobs (not streamed).
	PromptLogprobs []dsv4.PromptPosition `json:"prompt_logprobs,omitempty"`
}

type completionJSON struct {
	ID      string                 `json:"id"`
	Object  string                 `json:"object"`
	Created int64                  `json:"created"`
	Model   string                 `json:"model"`
	Choices []completionChoiceJSON `json:"choices"`
	Usage   *dsv4.Usage            `json:"usage,omitempty"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, body []byte) {
	var req dsv4.CompletionRequest
	rec := requestRecord(r)
	ok := decodeJSON(w, body, &req)
	rec.model = req.Model
	if !ok || !s.checkModel(w, req.Model) {
		s.m.errors.WithLabelValues("completions", "400").Inc()
		return
	}
	mt := req.MaxTokens
	if req.Echo && mt != nil && *mt == 0 {
		mt = nil // the prompt only, as vLLM's echo_without_generation (dsv4.CompletionRequest.Echo)
	}
	if !s.checkMaxTokens(w, map[string]*int{"max_tokens": mt}) {
		return
	}
	t0 := time.Now()
	stream, err := s.eng.CompleteStream(r.Context(), &req)
	if err != nil {
		s.m.errors.WithLabelValues("completions", "engine").Inc()
		s.writeEngineError(w, err)
		return
	}
	id, created := openaiwire.NewID("cmpl-"), time.Now().Unix()
	rec.id = id
	obs := s.m.observer(r.Context(), t0)
	obs.rec = rec
	// offsets[i] is where choice i's next token starts in its returned
	// text: after the echoed prompt (the chunk CompleteStream sends first,
	// which carries the prompt's logprobs when echo has logprobs and
	// otherwise none) and the tokens before it, in code points as vLLM's
	// text_offset (dsv4.TextPos). Streamed or not, the offsets are the
	// same.
	offsets := map[int]*dsv4.TextPos{}
	logprobs := func(ch *dsv4.ChatChunk) *dsv4.CompletionLogprobs {
		pos := offsets[ch.Index]
		if pos == nil {
			pos = &dsv4.TextPos{}
			offsets[ch.Index] = pos
		}
		var out *dsv4.CompletionLogprobs
		switch {
		case ch.PromptLogprobs != nil && req.Echo && req.Logprobs != nil:
			out = dsv4.LegacyPromptLogprobs(ch.PromptTokens, ch.PromptLogprobs, *req.Logprobs, pos)
		case ch.Logprobs == nil:
			pos.Advance(ch.Delta.Content)
		}
		if ch.Logprobs != nil {
			if out == nil {
				return dsv4.LegacyLogprobsAt(ch.Logprobs.Content, pos)
			}
			out.Append(dsv4.LegacyLogprobsAt(ch.Logprobs.Content, pos))
		}
		return out
	}
	if !req.Stream {
		var choices []completionChoiceJSON
		var usage dsv4.Usage
		get := func(i int) *completionChoiceJSON {
			for len(choices) <= i {
				choices = append(choices, completionChoiceJSON{Index: len(choices)})
			}
			return &choices[i]
		}
		var finishes []string
		for ch, err := range stream {
			if err != nil {
				obs.cut(r.Context())
				s.writeEngineError(w, err)
				return
			}
			obs.chunk(ch)
			if ch.Usage != nil {
				usage = *ch.Usage
				continue
			}
			c := get(ch.Index)
			if lp := logprobs(ch); lp != nil {
				if c.Logprobs == nil {
					c.Logprobs = lp
				} else {
					c.Logprobs.Append(lp)
				}
			}
			if ch.PromptLogprobs != nil {
				c.PromptLogprobs = ch.PromptLogprobs
			}
			c.Text += ch.Delta.Content
			if ch.FinishReason != "" {
				f := ch.FinishReason
				c.FinishReason = &f
				c.MatchedStop, c.StopReason = ch.MatchedStop, ch.StopReason
				finishes = append(finishes, f)
			}
		}
		obs.doneReasons(usage, finishes)
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, completionJSON{ID: id, Object: "text_completion", Created: created,
			Model: s.modelName, Choices: choices, Usage: s.usage(&usage)})
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.sse(w, r, stream, obs, func(ch *dsv4.ChatChunk) any {
		out := completionJSON{ID: id, Object: "text_completion", Created: created, Model: s.modelName}
		if ch.Usage != nil {
			if !includeUsage {
				return nil
			}
			out.Choices = []completionChoiceJSON{}
			out.Usage = s.usage(ch.Usage)
			return out
		}
		c := completionChoiceJSON{Index: ch.Index, Text: ch.Delta.Content, MatchedStop: ch.MatchedStop, StopReason: ch.StopReason}
		if lp := logprobs(ch); lp != nil {
			c.Logprobs = lp
		}
		if ch.FinishReason != "" {
			c.FinishReason = &ch.FinishReason
		}
		out.Choices = []completionChoiceJSON{c}
		if req.StreamOptions.Continuous() {
			out.Usage = ch.RunningUsage // vLLM's continuous_usage_stats
		}
		return out
	})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = openaiwire.WriteJSON(w, map[string]any{
		"object": "list",
		"data":   []map[string]any{s.modelObject()},
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// reqRecord is what a generation request's log line reports, filled in by
// the handler as it goes (see logged). It never holds prompt text.
type reqRecord struct {
	id       string // the response id ("" when none was made: an error)
	model    string // the "model" the request named ("": the served one)
	usage    dsv4.Usage
	finishes []string
	first    time.Time // the first output chunk (zero: none)
}

type reqRecordKey struct{}

// requestRecord returns r's record, or a throwaway one when r is not
// logged.
func requestRecord(r *http.Request) *reqRecord {
	if rec, ok := r.Context().Value(reqRecordKey{}).(*reqRecord); ok {
		return rec
	}
	return &reqRecord{}
}

// statusWriter remembers the status written through it; Unwrap lets
// http.ResponseController reach the connection's Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logged logs each finished generation request as one INFO line, as vLLM
// logs every request unless --disable-log-requests
// (vllm/entrypoints/logger.py RequestLogger; here one line at the end
// rather than one at arrival, so that it can carry the outcome): method,
// path, status, request_id (the response id; "" when the request failed
// before one was made), model (the name the request gave, else the served
// one), prompt_tokens, completion_tokens, finish_reasons (one per choice),
// ttft_ms (arrival to the first output chunk; absent when there was no
// output), duration_ms and remote_addr. Unlike vLLM's line it never holds
// the prompt or its token ids. ServerConfig.DisableLogRequests turns it
// off.
func (s *Server) logged(h http.HandlerFunc) http.HandlerFunc {
	if !s.logRequests {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &reqRecord{}
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r.WithContext(context.WithValue(r.Context(), reqRecordKey{}, rec)))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		model := rec.model
		if model == "" {
			model = s.modelName
		}
		finishes := rec.finishes
		if finishes == nil {
			finishes = []string{}
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.String("request_id", rec.id),
			slog.String("model", model),
			slog.Int("prompt_tokens", rec.usage.PromptTokens),
			slog.Int("completion_tokens", rec.usage.CompletionTokens),
			slog.Any("finish_reasons", finishes),
		}
		if !rec.first.IsZero() {
			attrs = append(attrs, slog.Float64("ttft_ms", ms(rec.first.Sub(start))))
		}
		attrs = append(attrs,
			slog.Float64("duration_ms", ms(time.Since(start))),
			slog.String("remote_addr", r.RemoteAddr))
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	}
}
