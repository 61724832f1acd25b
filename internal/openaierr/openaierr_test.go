package openaierr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestTypeError checks that JSON type errors name the OpenAI field (a
// message's or tool's with its index) and JSON types, never Go type or
// embedded-struct names.
func TestTypeError(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		body, field, want string
	}{
		{`{"messages":"hi"}`, "messages", `invalid type for "messages": expected an array of messages, got string`},
		{`{` + msgs + `,"max_tokens":1.5}`, "max_tokens", `invalid type for "max_tokens": expected an integer, got number 1.5`},
		{`{` + msgs + `,"max_tokens":"10"}`, "max_tokens", `invalid type for "max_tokens": expected an integer, got string`},
		{`{` + msgs + `,"temperature":"hot"}`, "temperature", `invalid type for "temperature": expected a number, got string`},
		{`{` + msgs + `,"seed":"x"}`, "seed", `invalid type for "seed": expected an integer, got string`},
		{`{` + msgs + `,"seed":18446744073709551615}`, "seed", `invalid type for "seed": expected an integer in [-9223372036854775808, 9223372036854775807], got number 18446744073709551615`},
		{`{` + msgs + `,"stream":"yes"}`, "stream", `invalid type for "stream": expected a boolean, got string`},
		{`{` + msgs + `,"tools":"x"}`, "tools", `invalid type for "tools": expected an array of tools, got string`},
		{`{` + msgs + `,"stop_token_ids":[1.5]}`, "stop_token_ids", `expected an integer, got number 1.5`},
		{`{"model":5,` + msgs + `}`, "model", `invalid type for "model": expected a string, got number`},
		{`[]`, "", `request body must be a JSON object, got array`},
		{`{` + msgs + `,"stop":5}`, "stop", `invalid type for "stop": expected a string or an array of strings, got number`},
		{`{` + msgs + `,"stop":[1]}`, "stop", `invalid type for "stop": expected a string or an array of strings, got array`},
		{`{"messages":[1]}`, "messages", `invalid type for "messages": expected a message object, got number`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":5}}]}`, "tools[0].function.name", `expected a string, got number`},
		{`{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":5}}]}`, "tools[1].function.name", `invalid type for "tools[1].function.name": expected a string, got number`},
		{`{"messages":[{"role":"user","content":"a"},{"role":5}]}`, "messages[1].role", `invalid type for "messages[1].role": expected a string, got number`},
	}
	for _, c := range cases {
		var req dsv4.ChatRequest
		err := json.Unmarshal([]byte(c.body), &req)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Errorf("%s: %v is not a type error", c.body, err)
			continue
		}
		e := Decode([]byte(c.body), &req) // TypeError, with list indices
		field, msg := e.Param, e.Message
		if field != c.field || !strings.Contains(msg, c.want) {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", c.body, field, msg, c.field, c.want)
		}
		if strings.Contains(msg, "RequestSampling") || strings.Contains(msg, "int64") || strings.Contains(msg, "template.") || strings.Contains(msg, "[]") {
			t.Errorf("%s: message names Go types: %q", c.body, msg)
		}
	}
}

// TestFromEngine: the status, param, code and type of each engine error.
func TestFromEngine(t *testing.T) {
	for _, tc := range []struct {
		err                error
		status             int
		param, code, etype string
	}{
		{&dsv4.ParamError{Param: "tokens"}, 400, "tokens", "", "invalid_request_error"},
		{dsv4.ErrContextLength, 400, "messages", "context_length_exceeded", "invalid_request_error"},
		{&dsv4.ContextLengthError{PromptTokens: 5, Context: 4}, 400, "messages", "context_length_exceeded", "invalid_request_error"},
		{fmt.Errorf("chat: %w", &dsv4.ContextLengthError{PromptTokens: 5, MaxTokens: 4097, Context: 4096}), 400, "max_tokens", "context_length_exceeded", "invalid_request_error"},
		{dsv4.ErrTemplateLimit, 400, "messages", "template_limit_exceeded", "invalid_request_error"},
		{dsv4.ErrNoChat, 501, "", "", "invalid_request_error"},
		{dsv4.ErrInvalidParams, 400, "", "", "invalid_request_error"},
		{dsv4.ErrRequestTooLarge, 400, "max_tokens", "request_too_large", "invalid_request_error"},
		{dsv4.ErrQueueFull, 503, "", "queue_full", "service_unavailable"},
		{context.DeadlineExceeded, 499, "", "cancelled", "invalid_request_error"},
		{dsv4.ErrEngineClosed, 503, "", "shutting_down", "service_unavailable"},
		{context.Canceled, 499, "", "cancelled", "invalid_request_error"},
		{errors.New("boom"), 500, "", "", "internal_error"},
	} {
		e := FromEngine(tc.err)
		if e.Status != tc.status || e.Param != tc.param || e.Code != tc.code || e.Type != tc.etype {
			t.Errorf("%v: %+v", tc.err, e)
		}
	}
}
