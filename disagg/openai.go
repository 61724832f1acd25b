package disagg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaierr"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
)

// MaxBodyBytes is the default request body limit of the servers and the
// router (PrefillConfig, DecodeConfig and RouterConfig.MaxBodyBytes), and
// the limit of the prefill answer the router reads in sequential mode. A
// larger request body is refused with 413 request_too_large, as
// examples/server's --max-body-bytes refuses one.
const MaxBodyBytes = 32 << 20

// bodyLimit is a config's MaxBodyBytes: 0 is MaxBodyBytes, a negative
// value an error naming field.
func bodyLimit(field string, v int64) (int64, error) {
	switch {
	case v == 0:
		return MaxBodyBytes, nil
	case v < 0:
		return 0, fmt.Errorf("%w: disagg: %s must be >= 0 (0: %d bytes), got %d", dsv4.ErrInvalidParams, field, MaxBodyBytes, v)
	}
	return v, nil
}

// writeError sends an OpenAI error object (an empty code is sent as null).
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	(&openaierr.Error{Status: status, Type: typ, Code: code, Message: msg}).Write(w)
}

// apiError maps an engine, transfer or request error to the HTTP status and
// OpenAI error object the servers answer (status, type, param and code as
// examples/server answers the same engine errors: openaierr.FromEngine).
func apiError(err error) *openaierr.Error {
	var oe *openaierr.Error
	if errors.As(err, &oe) {
		return &openaierr.Error{Status: oe.Status, Type: oe.Type, Param: oe.Param, Code: oe.Code, Message: err.Error()}
	}
	// The engine's own errors first (a rejection wrapped in an aborted room is
	// still the client's 400), then the transfer's, then a cancellation.
	if f := openaierr.FromEngine(err); f.Status != http.StatusInternalServerError && f.Code != "cancelled" {
		return f
	}
	e := &openaierr.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: err.Error()}
	set := func(st int, typ, param, code string) { e.Status, e.Type, e.Param, e.Code = st, typ, param, code }
	switch {
	case errors.Is(err, ErrIncompatible):
		set(http.StatusBadGateway, "internal_error", "", "incompatible_peer")
	case errors.Is(err, ErrAborted):
		set(http.StatusBadGateway, "internal_error", "", "transfer_aborted")
	case errors.Is(err, ErrTimeout):
		set(http.StatusGatewayTimeout, "internal_error", "", "transfer_timeout")
	case errors.Is(err, ErrPoolFull):
		set(http.StatusServiceUnavailable, "service_unavailable", "", "kv_pool_full")
	case errors.Is(err, ErrMismatch):
		set(http.StatusBadGateway, "internal_error", "", "transfer_mismatch")
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrTruncated), errors.Is(err, ErrChecksum), errors.Is(err, ErrMalformed):
		set(http.StatusBadGateway, "internal_error", "", "transfer_failed")
	case errors.Is(err, ErrBootstrapNotAllowed):
		set(http.StatusForbidden, "invalid_request_error", "bootstrap_host", "bootstrap_host_not_allowed")
	case errors.Is(err, ErrRoomInUse):
		set(http.StatusConflict, "invalid_request_error", "bootstrap_room", "room_in_use")
	default:
		return openaierr.FromEngine(err) // a cancellation (499), else 500
	}
	return e
}

func writeErr(w http.ResponseWriter, err error) { apiError(err).Write(w) }

// readBody reads a POST body within limit bytes, writing the error itself:
// 413 request_too_large over the limit, as examples/server.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use POST")
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("request body over %d bytes", limit))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "reading body: "+err.Error())
		return nil, false
	}
	return b, true
}

// readJSONObject reads a POST body that must be a JSON object (or null) into
// its top-level fields, writing the error itself (OpenAI's, as
// examples/server words it: "malformed JSON: …", "request body must be a
// JSON object, got …").
func readJSONObject(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, map[string]json.RawMessage, bool) {
	body, ok := readBody(w, r, limit)
	if !ok {
		return nil, nil, false
	}
	var raw map[string]json.RawMessage
	if e := openaierr.Decode(body, &raw); e != nil {
		e.Write(w)
		return nil, nil, false
	}
	if raw == nil { // null: no fields, as examples/server reads it
		raw = map[string]json.RawMessage{}
	}
	return body, raw, true
}

// readChat reads a chat-completions body: the request and its bootstrap
// fields (ok false: the error was written). Errors are OpenAI's with the
// field at fault as param, as examples/server answers them.
func readChat(w http.ResponseWriter, r *http.Request, limit int64) (req dsv4.ChatRequest, bs Bootstrap, hasBootstrap, ok bool) {
	body, raw, ok := readJSONObject(w, r, limit)
	if !ok {
		return req, bs, false, false
	}
	if e := openaierr.Decode(body, &req); e != nil {
		e.Write(w)
		return req, bs, false, false
	}
	bs, hasBootstrap, e := bootstrapOf(body, raw)
	if e != nil {
		e.Write(w)
		return req, bs, false, false
	}
	return req, bs, hasBootstrap, true
}

// checkServed runs examples/server's checks ahead of the engine's: a
// "model" other than the served name or one of its aliases (an empty one is
// the served one) is 404 model_not_found, a max_tokens or
// max_completion_tokens below 1 is 400 with that param (one beyond the
// context is checkRequest's, with the prompt's tokens).
func checkServed(req *dsv4.ChatRequest, name string, aliases []string) error {
	if m := req.Model; m != "" && m != name && !slices.Contains(aliases, m) {
		return openaierr.ModelNotFound(m, name)
	}
	if e := openaierr.MaxTokens("max_tokens", req.MaxTokens, 0); e != nil {
		return e
	}
	if e := openaierr.MaxTokens("max_completion_tokens", req.MaxCompletionTokens, 0); e != nil {
		return e
	}
	return nil
}

// Bootstrap is where a decode server finds a request's state: the prefill
// server's bootstrap address and the room (SGLang's bootstrap_host,
// bootstrap_port and bootstrap_room request fields; in sequential mode the
// same three inside kv_transfer_params).
type Bootstrap struct {
	Host string `json:"bootstrap_host"`
	Port int    `json:"bootstrap_port"`
	Room uint64 `json:"bootstrap_room"`
}

// Addr is host:port.
func (b Bootstrap) Addr() string { return joinHostPort(b.Host, b.Port) }

func joinHostPort(h string, p int) string {
	if len(h) > 0 && h[0] != '[' && containsColon(h) {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(p)
}

func containsColon(s string) bool {
	for i := range len(s) {
		if s[i] == ':' {
			return true
		}
	}
	return false
}

// bootstrapFields are the bootstrap fields as a request body carries them
// (Room nil: absent or null).
type bootstrapFields struct {
	Host string  `json:"bootstrap_host"`
	Port int     `json:"bootstrap_port"`
	Room *uint64 `json:"bootstrap_room"`
}

// bootstrapOf extracts the bootstrap fields of a request body (raw: its
// top-level fields): top level (concurrent mode) or kv_transfer_params
// (sequential mode). ok is false when neither is present. A field of the
// wrong type is a 400 naming it ("bootstrap_room",
// "kv_transfer_params.bootstrap_port").
func bootstrapOf(body []byte, raw map[string]json.RawMessage) (Bootstrap, bool, *openaierr.Error) {
	var f struct {
		Host string           `json:"bootstrap_host"`
		Port int              `json:"bootstrap_port"`
		Room *uint64          `json:"bootstrap_room"`
		KV   *bootstrapFields `json:"kv_transfer_params"`
	}
	if e := openaierr.Decode(body, &f); e != nil {
		return Bootstrap{}, false, e
	}
	src := &bootstrapFields{f.Host, f.Port, f.Room}
	if p, has := raw["kv_transfer_params"]; has && string(p) != "null" {
		src = f.KV
	}
	if src.Room == nil {
		return Bootstrap{}, false, nil
	}
	return Bootstrap{Host: src.Host, Port: src.Port, Room: *src.Room}, true, nil
}

type chatChunkJSON struct {
	ID      string                   `json:"id"`
	Object  string                   `json:"object"`
	Created int64                    `json:"created"`
	Model   string                   `json:"model"`
	Choices []openaiwire.ChunkChoice `json:"choices"`
	Usage   *dsv4.Usage              `json:"usage,omitempty"`
}

// writeChat renders an engine chat stream as an OpenAI chat.completion (JSON)
// or chat.completion.chunk events (SSE ending in [DONE]). onFirst is called at
// the first chunk (TTFT). It returns the stream's error, if any.
func writeChat(w http.ResponseWriter, r *http.Request, req *dsv4.ChatRequest, model string, stream iter.Seq2[*dsv4.ChatChunk, error], onFirst func()) error {
	id, created := openaiwire.NewID("chatcmpl-"), time.Now().Unix()
	first := true
	if !req.Stream {
		var acc dsv4.ChatAccumulator
		for ch, err := range stream {
			if err != nil {
				writeErr(w, err)
				return err
			}
			if first && onFirst != nil {
				onFirst()
			}
			first = false
			acc.Add(ch)
		}
		resp := acc.Response()
		w.Header().Set("Content-Type", "application/json")
		return openaiwire.WriteJSON(w, openaiwire.ChatResponse{ID: id, Object: "chat.completion", Created: created,
			Model: model, Choices: resp.Choices, Usage: resp.Usage, PromptLogprobs: resp.PromptLogprobs})
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(v any) error {
		b, err := openaiwire.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	for ch, err := range stream {
		if err != nil {
			if r.Context().Err() == nil {
				ae := apiError(err)
				e := openaiwire.Error{Message: ae.Message, Type: ae.Type}
				if ae.Param != "" {
					e.Param = ae.Param
				}
				if ae.Code != "" {
					e.Code = ae.Code
				}
				_ = write(map[string]openaiwire.Error{"error": e})
				_, _ = io.WriteString(w, "data: [DONE]\n\n")
				_ = rc.Flush()
			}
			return err
		}
		if first && onFirst != nil {
			onFirst()
		}
		first = false
		out := chatChunkJSON{ID: id, Object: "chat.completion.chunk", Created: created, Model: model}
		if ch.Usage != nil {
			if !includeUsage {
				continue
			}
			out.Choices = []openaiwire.ChunkChoice{}
			out.Usage = ch.Usage
		} else {
			out.Choices = []openaiwire.ChunkChoice{openaiwire.NewChunkChoice(ch)}
			if req.StreamOptions.Continuous() {
				out.Usage = ch.RunningUsage // vLLM's continuous_usage_stats
			}
		}
		if err := write(out); err != nil {
			return err // client gone: leaving the loop frees the engine's state
		}
	}
	_, err := io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
	return err
}

// modelList is GET /v1/models' answer: OpenAI's list of model objects, with
// vLLM's "root" and, when maxLen > 0, "max_model_len" (tokens), as
// examples/server answers.
func modelList(names []string, created int64, maxLen int) map[string]any {
	data := []map[string]any{}
	for _, n := range names {
		data = append(data, modelObject(n, created, maxLen))
	}
	return map[string]any{"object": "list", "data": data}
}

// modelObject is one entry of modelList.
func modelObject(name string, created int64, maxLen int) map[string]any {
	m := map[string]any{"id": name, "object": "model", "created": created, "owned_by": "dsv4go", "root": name}
	if maxLen > 0 {
		m["max_model_len"] = maxLen
	}
	return m
}

// serveModels answers GET /v1/models with the served model name and its
// context length (tokens).
func serveModels(name string, created int64, maxLen int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, modelList([]string{name}, created, maxLen))
	}
}

// serveModel answers GET /v1/models/{id}: serveModels' entry for name or
// one of aliases, else 404 model_not_found (as examples/server answers).
func serveModel(name string, aliases []string, created int64, maxLen int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		if id := r.PathValue("id"); id != name && !slices.Contains(aliases, id) {
			openaierr.ModelNotFound(id, name).Write(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = openaiwire.WriteJSON(w, modelObject(name, created, maxLen))
	}
}

// notFound answers unknown paths with an OpenAI error object (404
// not_found_error, as examples/server and OpenAI answer).
func notFound(w http.ResponseWriter, r *http.Request) { openaierr.NoRoute(r).Write(w) }

// healthOK answers GET /health and /ping (vLLM's api_server.py serves
// /ping, SageMaker's health check, with its /health handler; GET or POST):
// 200 with an empty body.
func healthOK(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
