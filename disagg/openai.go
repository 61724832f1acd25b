package disagg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
)

// MaxBodyBytes bounds a request body read by the servers and the router.
const MaxBodyBytes = 32 << 20

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := openaiwire.Error{Message: msg, Type: typ}
	if code != "" {
		e.Code = code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]openaiwire.Error{"error": e})
}

// errorStatus maps an engine or transfer error to an HTTP status, an
// OpenAI error type and code.
func errorStatus(err error) (int, string, string) {
	var pe *dsv4.ParamError
	switch {
	case errors.As(err, &pe), errors.Is(err, dsv4.ErrInvalidParams):
		return http.StatusBadRequest, "invalid_request_error", ""
	case errors.Is(err, dsv4.ErrContextLength):
		return http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
	case errors.Is(err, dsv4.ErrRequestTooLarge):
		return http.StatusBadRequest, "invalid_request_error", "request_too_large"
	case errors.Is(err, dsv4.ErrQueueFull), errors.Is(err, dsv4.ErrEngineClosed):
		return http.StatusServiceUnavailable, "service_unavailable", "overloaded"
	case errors.Is(err, ErrIncompatible):
		return http.StatusBadGateway, "internal_error", "incompatible_peer"
	case errors.Is(err, ErrAborted):
		return http.StatusBadGateway, "internal_error", "transfer_aborted"
	case errors.Is(err, ErrTimeout):
		return http.StatusGatewayTimeout, "internal_error", "transfer_timeout"
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrTruncated), errors.Is(err, ErrChecksum), errors.Is(err, ErrMalformed):
		return http.StatusBadGateway, "internal_error", "transfer_failed"
	case errors.Is(err, ErrBootstrapNotAllowed):
		return http.StatusForbidden, "invalid_request_error", "bootstrap_host_not_allowed"
	case errors.Is(err, ErrRoomInUse):
		return http.StatusConflict, "invalid_request_error", "room_in_use"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 499, "invalid_request_error", "cancelled"
	}
	return http.StatusInternalServerError, "internal_error", ""
}

func writeErr(w http.ResponseWriter, err error) {
	st, typ, code := errorStatus(err)
	writeError(w, st, typ, code, err.Error())
}

// readBody reads a POST body within MaxBodyBytes, writing the error itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use POST")
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "reading body: "+err.Error())
		return nil, false
	}
	return b, true
}

// readChat reads a chat-completions body: the request and its bootstrap
// fields (ok false: the error was written).
func readChat(w http.ResponseWriter, r *http.Request) (req dsv4.ChatRequest, bs Bootstrap, hasBootstrap, ok bool) {
	body, ok := readBody(w, r)
	if !ok {
		return req, bs, false, false
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "malformed JSON: "+err.Error())
		return req, bs, false, false
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid request: "+err.Error())
		return req, bs, false, false
	}
	bs, hasBootstrap, err := bootstrapOf(raw)
	if err != nil {
		writeErr(w, err)
		return req, bs, false, false
	}
	return req, bs, hasBootstrap, true
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

// bootstrapOf extracts the bootstrap fields of a request body: top level
// (concurrent mode) or kv_transfer_params (sequential mode). ok is false when
// neither is present.
func bootstrapOf(raw map[string]json.RawMessage) (Bootstrap, bool, error) {
	src := raw
	if p, has := raw["kv_transfer_params"]; has && string(p) != "null" {
		src = nil
		if err := json.Unmarshal(p, &src); err != nil {
			return Bootstrap{}, false, fmt.Errorf("%w: kv_transfer_params: %v", dsv4.ErrInvalidParams, err)
		}
	}
	rr, has := src["bootstrap_room"]
	if !has || string(rr) == "null" {
		return Bootstrap{}, false, nil
	}
	var b Bootstrap
	if err := json.Unmarshal(rr, &b.Room); err != nil {
		return b, false, fmt.Errorf("%w: bootstrap_room: %v", dsv4.ErrInvalidParams, err)
	}
	if h, ok := src["bootstrap_host"]; ok {
		if err := json.Unmarshal(h, &b.Host); err != nil {
			return b, false, fmt.Errorf("%w: bootstrap_host: %v", dsv4.ErrInvalidParams, err)
		}
	}
	if p, ok := src["bootstrap_port"]; ok {
		if err := json.Unmarshal(p, &b.Port); err != nil {
			return b, false, fmt.Errorf("%w: bootstrap_port: %v", dsv4.ErrInvalidParams, err)
		}
	}
	return b, true, nil
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
		return json.NewEncoder(w).Encode(openaiwire.ChatResponse{ID: id, Object: "chat.completion", Created: created,
			Model: model, Choices: resp.Choices, Usage: resp.Usage})
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(v any) error {
		b, err := json.Marshal(v)
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
				_, typ, code := errorStatus(err)
				e := openaiwire.Error{Message: err.Error(), Type: typ}
				if code != "" {
					e.Code = code
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
			c := openaiwire.ChunkChoice{Index: ch.Index, Delta: ch.Delta, Logprobs: ch.Logprobs, MatchedStop: ch.MatchedStop}
			if ch.FinishReason != "" {
				c.FinishReason = &ch.FinishReason
			}
			out.Choices = []openaiwire.ChunkChoice{c}
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
		m := map[string]any{"id": n, "object": "model", "created": created, "owned_by": "dsv4go", "root": n}
		if maxLen > 0 {
			m["max_model_len"] = maxLen
		}
		data = append(data, m)
	}
	return map[string]any{"object": "list", "data": data}
}

// serveModels answers GET /v1/models with the served model name and its
// context length (tokens).
func serveModels(name string, created int64, maxLen int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use GET")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(modelList([]string{name}, created, maxLen))
	}
}

// notFound answers unknown paths with an OpenAI error object.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
}
