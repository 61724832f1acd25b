// Package openaierr reports bad requests to the OpenAI-compatible servers as
// OpenAI error objects ({"error": {message, type, param, code}}), so that the
// plain server (examples/server) and the prefill/decode servers and router
// (package disagg) answer a bad request with the same status, type, param,
// code and message. Messages name JSON fields and JSON types, never Go
// types or struct names.
package openaierr

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/openaiwire"
	"github.com/dsv4go/dsv4go/template"
)

// Error is an HTTP status and an OpenAI error object; an empty Param or
// Code is sent as null. It implements error (the message).
type Error struct {
	Status  int    // HTTP status
	Type    string // e.g. "invalid_request_error"
	Param   string // the request field at fault, e.g. "messages[0].role"
	Code    string // e.g. "model_not_found"
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Write sends e as a JSON {"error": {...}} answer with status e.Status.
func (e *Error) Write(w http.ResponseWriter) {
	o := openaiwire.Error{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		o.Param = e.Param
	}
	if e.Code != "" {
		o.Code = e.Code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = openaiwire.WriteJSON(w, map[string]openaiwire.Error{"error": o})
}

// Decode unmarshals the JSON request body into v (unknown fields are
// ignored). A failure is a 400 invalid_request_error: invalid JSON is
// "malformed JSON: …"; a value of the wrong type names the field in Param
// and the message (`invalid type for "max_tokens": expected an integer, got
// string`; a message's field with the message's index, e.g.
// "messages[1].content"); a value a field's decoder refuses names the
// field too (a *dsv4.ParamError, e.g. tool_choice "sometimes" or a mixed
// completions prompt; a *template.FieldError, e.g. content 5); a body that
// is not an object is "request body must be a JSON object, got …".
func Decode(body []byte, v any) *Error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	e := &Error{Status: http.StatusBadRequest, Type: "invalid_request_error"}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var fe *template.FieldError
	var pe *dsv4.ParamError
	switch {
	case errors.As(err, &te):
		te.Field = inMessage(body, te.Field)
		e.Param, e.Message = TypeError(te)
	case errors.As(err, &se):
		e.Message = "malformed JSON: " + err.Error()
	case errors.As(err, &fe):
		e.Param = inMessage(body, "messages."+fe.Field)
		e.Message = fmt.Sprintf("invalid %s: %s", e.Param, fe.Detail)
	case errors.As(err, &pe):
		e.Param, e.Message = pe.Param, pe.Error()
	default:
		e.Message = "invalid request: " + err.Error()
	}
	return e
}

// inMessage turns the field of a message or tool ("messages.content",
// "tools.function.name") into the indexed name ("messages[2].content"):
// the first element of body's list that does not decode is the one at
// fault (encoding/json reports the first error and names fields without
// indices). Other fields, and a list whose elements all decode, keep field
// as it is.
func inMessage(body []byte, field string) string {
	for _, l := range []struct {
		name    string
		decodes func(json.RawMessage) bool
	}{{"messages", decodes[template.Message]}, {"tools", decodes[dsv4.Tool]}} {
		rest, ok := strings.CutPrefix(field, l.name+".")
		if !ok {
			continue
		}
		var r map[string]json.RawMessage
		var list []json.RawMessage
		if json.Unmarshal(body, &r) != nil || json.Unmarshal(r[l.name], &list) != nil {
			return field
		}
		for i, raw := range list {
			if !l.decodes(raw) {
				return fmt.Sprintf("%s[%d].%s", l.name, i, rest)
			}
		}
	}
	return field
}

// decodes reports whether raw decodes into a T.
func decodes[T any](raw json.RawMessage) bool {
	var v T
	return json.Unmarshal(raw, &v) == nil
}

// ModelNotFound is the 404 model_not_found answer (param "model") to a
// request for a model other than served.
func ModelNotFound(model, served string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("the model %q does not exist; this server serves %q", model, served)}
}

// MaxTokens is the 400 answer (param name) to a token limit field such as
// "max_tokens" below 1 or, when limit > 0, above limit; nil when v is nil
// or allowed. A value beyond the context is left to the engine, whose
// *dsv4.ContextLengthError names the prompt's tokens as vLLM's message
// does (FromEngine).
func MaxTokens(name string, v *int, limit int) *Error {
	switch {
	case v == nil || (*v >= 1 && (limit <= 0 || *v <= limit)):
		return nil
	case *v < 1:
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: name,
			Message: fmt.Sprintf("%s must be at least 1, got %d", name, *v)}
	}
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: name,
		Message: fmt.Sprintf("%s must be in [1, %d], got %d", name, limit, *v)}
}

// NoRoute is the 404 answer (type "not_found_error", code null, as
// OpenAI's) to a path that no route serves.
func NoRoute(r *http.Request) *Error {
	return &Error{Status: http.StatusNotFound, Type: "not_found_error",
		Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)}
}

// TypeError turns a JSON type error into the OpenAI field name (Go
// embedded-struct names such as "RequestSampling." dropped; "" for the
// body itself) and a message that names JSON types, not Go types:
// `invalid type for "max_tokens": expected an integer, got number 1.5`.
func TypeError(te *json.UnmarshalTypeError) (field, msg string) {
	var parts []string
	for _, p := range strings.Split(te.Field, ".") {
		if p != "" && !(p[0] >= 'A' && p[0] <= 'Z') {
			parts = append(parts, p)
		}
	}
	field = strings.Join(parts, ".")
	want := jsonTypeName(field, te.Type)
	if num, ok := strings.CutPrefix(te.Value, "number "); ok && !strings.ContainsAny(num, ".eE") {
		// An integer literal that does not fit the field.
		if r, ok := intRange(te.Type); ok {
			want = "an integer in " + r
		}
	}
	if field == "" {
		return "", fmt.Sprintf("request body must be a JSON object, got %s", te.Value)
	}
	return field, fmt.Sprintf("invalid type for %q: expected %s, got %s", field, want, te.Value)
}

// jsonTypeName describes Go type t as the JSON a client must send.
func jsonTypeName(field string, t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[dsv4.StringList]() {
		return "a string or an array of strings"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		last := field[strings.LastIndex(field, ".")+1:]
		switch last {
		case "messages":
			return "an array of messages"
		case "tools":
			return "an array of tools"
		}
		return "an array"
	case reflect.Struct:
		switch {
		case t.Name() == "Message" || field == "messages":
			return "a message object"
		case t.Name() == "Tool":
			return "a tool object"
		}
		return "an object"
	case reflect.Map:
		return "an object"
	}
	return "a valid value"
}

// intRange is the accepted range of an integer type, as text.
func intRange(t reflect.Type) (string, bool) {
	if t == nil {
		return "", false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("[%d, %d]", int64(-1)<<(bits-1), int64(math.MaxInt64>>(64-bits))), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("[0, %d]", uint64(math.MaxUint64>>(64-t.Bits()))), true
	}
	return "", false
}

// BearerAuth returns h guarded by an API key, as vLLM's and SGLang's
// --api-key: a request whose Authorization header is not exactly
// "Bearer "+key (compared in constant time) gets 401 with the OpenAI error
// object (type invalid_request_error, code invalid_api_key) and never
// reaches h. An empty key returns h unchanged.
func BearerAuth(key string, h http.Handler) http.Handler {
	if key == "" {
		return h
	}
	want := []byte("Bearer " + key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			(&Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "invalid or missing API key"}).Write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// FromEngine is the OpenAI error answered for an error of the dsv4 engine
// (Engine.Chat, ChatStream, Complete, Tokenize, Detokenize, ChatPrompt):
// a *dsv4.ParamError or dsv4.ErrInvalidParams is 400 (param the field at
// fault), dsv4.ErrTemplateLimit 400 template_limit_exceeded (the template
// hit a sandbox limit on this request's messages, not a context error),
// dsv4.ErrContextLength 400 context_length_exceeded (param "max_tokens" for a
// *dsv4.ContextLengthError about max_tokens, else "messages"), dsv4.ErrRequestTooLarge
// 400 request_too_large (param max_tokens), dsv4.ErrQueueFull 503
// queue_full, dsv4.ErrEngineClosed 503 shutting_down, dsv4.ErrNoChat 501,
// a cancelled or expired context 499 cancelled, anything else 500
// internal_error. The message is err's text.
func FromEngine(err error) *Error {
	e := &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: err.Error()}
	set := func(st int, typ, param, code string) { e.Status, e.Type, e.Param, e.Code = st, typ, param, code }
	var pe *dsv4.ParamError
	var ce *dsv4.ContextLengthError
	switch {
	case errors.As(err, &ce):
		set(http.StatusBadRequest, "invalid_request_error", ce.Param(), "context_length_exceeded")
	case errors.As(err, &pe):
		set(http.StatusBadRequest, "invalid_request_error", pe.Param, "")
	case errors.Is(err, dsv4.ErrInvalidParams):
		set(http.StatusBadRequest, "invalid_request_error", "", "")
	case errors.Is(err, dsv4.ErrTemplateLimit):
		set(http.StatusBadRequest, "invalid_request_error", "messages", "template_limit_exceeded")
	case errors.Is(err, dsv4.ErrContextLength):
		set(http.StatusBadRequest, "invalid_request_error", "messages", "context_length_exceeded")
	case errors.Is(err, dsv4.ErrRequestTooLarge):
		set(http.StatusBadRequest, "invalid_request_error", "max_tokens", "request_too_large")
	case errors.Is(err, dsv4.ErrQueueFull):
		set(http.StatusServiceUnavailable, "service_unavailable", "", "queue_full")
	case errors.Is(err, dsv4.ErrEngineClosed):
		set(http.StatusServiceUnavailable, "service_unavailable", "", "shutting_down")
	case errors.Is(err, dsv4.ErrNoChat):
		set(http.StatusNotImplemented, "invalid_request_error", "", "")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		set(499, "invalid_request_error", "", "cancelled")
	}
	return e
}
