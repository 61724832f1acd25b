package disagg

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/models"
)

// apiErr is an answered OpenAI error object; Param and Code nil: null.
type apiErr struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

// TestBadRequestErrors: the decode server, the prefill server and the router
// (PD and regular mode) answer bad requests as examples/server does: status,
// type, param (the field at fault, else null), code (else null) and a
// message that names JSON fields and types, never Go's.
func TestBadRequestErrors(t *testing.T) {
	pd := startPDWith(t, PrefillConfig{ContextLength: models.TinyContextLength},
		DecodeConfig{ContextLength: models.TinyContextLength, FetchTimeout: 30 * time.Second})
	targets := []struct{ name, url string }{
		{"decode", pd.dURL},
		{"prefill", pd.pURL},
		{"router_pd", routerFor(t, RouterConfig{PD: true, Prefill: []PrefillWorker{{URL: pd.pURL, BootstrapPort: pd.bootPort}}, Decode: []string{pd.dURL}})},
		{"router_regular", routerFor(t, RouterConfig{Workers: []string{pd.dURL}})},
	}
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	boot := fmt.Sprintf(`"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":%%d`, pd.bootPort)
	const bad = "invalid_request_error"
	cases := []struct {
		name, method, path, body string
		serversOnly              bool // a bootstrap field, which the router owns (it replaces it)
		status                   int
		typ, param, code         string // "": null
		msg                      string // the message, or its prefix
	}{
		{"temperature_type", "POST", "/v1/chat/completions", `{` + msgs + `,"temperature":"hot"}`, false,
			400, bad, "temperature", "", `invalid type for "temperature": expected a number, got string`},
		{"max_tokens_type", "POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":"5"}`, false,
			400, bad, "max_tokens", "", `invalid type for "max_tokens": expected an integer, got string`},
		{"n_type", "POST", "/v1/chat/completions", `{` + msgs + `,"n":"2"}`, false,
			400, bad, "n", "", `invalid type for "n": expected an integer, got string`},
		{"n_type_stream", "POST", "/v1/chat/completions", `{` + msgs + `,"n":"2","stream":true}`, false,
			400, bad, "n", "", `invalid type for "n": expected an integer, got string`},
		{"stream_type", "POST", "/v1/chat/completions", `{` + msgs + `,"stream":"yes"}`, false,
			400, bad, "stream", "", `invalid type for "stream": expected a boolean, got string`},
		{"messages_type", "POST", "/v1/chat/completions", `{"messages":"hi"}`, false,
			400, bad, "messages", "", `invalid type for "messages": expected an array of messages, got string`},
		{"malformed", "POST", "/v1/chat/completions", `{"messages":`, false,
			400, bad, "", "", `malformed JSON: unexpected end of JSON input`},
		{"not_object", "POST", "/v1/chat/completions", `[]`, false,
			400, bad, "", "", `request body must be a JSON object, got array`},
		{"no_messages", "POST", "/v1/chat/completions", `{}`, false,
			400, bad, "messages", "", `dsv4: invalid messages: `},
		{"null_body", "POST", "/v1/chat/completions", `null`, false,
			400, bad, "messages", "", `dsv4: invalid messages: `},
		{"bad_role", "POST", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, false,
			400, bad, "messages[0].role", "", `dsv4: invalid messages[0].role: `},
		{"temperature_range", "POST", "/v1/chat/completions", `{` + msgs + `,"temperature":-1}`, false,
			400, bad, "temperature", "", `dsv4: invalid temperature: `},
		{"max_tokens_zero", "POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, false,
			400, bad, "max_tokens", "", `max_tokens must be at least 1, got 0`},
		{"max_tokens_over", "POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":5000}`, false,
			400, bad, "max_tokens", "context_length_exceeded", `'max_tokens' or 'max_completion_tokens' is too large: 5000. This model's maximum context length is 4096 tokens and your request has 5 input tokens (5000 > 4096 - 5). (parameter=max_tokens, value=5000)`},
		{"max_completion_tokens", "POST", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":-5}`, false,
			400, bad, "max_completion_tokens", "", `max_completion_tokens must be at least 1, got -5`},
		{"max_completion_tokens_over", "POST", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":4097}`, false,
			400, bad, "max_tokens", "context_length_exceeded", `'max_tokens' or 'max_completion_tokens' is too large: 4097. This model's maximum context length is 4096 tokens and your request has 5 input tokens (4097 > 4096 - 5). (parameter=max_tokens, value=4097)`},
		{"prompt_plus_max_tokens_over", "POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":4092}`, false,
			400, bad, "max_tokens", "context_length_exceeded", `'max_tokens' or 'max_completion_tokens' is too large: 4092. This model's maximum context length is 4096 tokens and your request has 5 input tokens (4092 > 4096 - 5). (parameter=max_tokens, value=4092)`},
		{"model_unknown", "POST", "/v1/chat/completions", `{"model":"gpt-4",` + msgs + `}`, false,
			404, bad, "model", "model_not_found", `the model "gpt-4" does not exist; this server serves "dsv4-tiny"`},
		{"model_unknown_pd", "POST", "/v1/chat/completions", `{"model":"gpt-4",` + msgs + `,` + boot + `}`, true,
			404, bad, "model", "model_not_found", `the model "gpt-4" does not exist; this server serves "dsv4-tiny"`},
		{"model_type", "POST", "/v1/chat/completions", `{"model":5,` + msgs + `}`, false,
			400, bad, "model", "", `invalid type for "model": expected a string, got number`},
		{"bootstrap_room_type", "POST", "/v1/chat/completions", `{` + msgs + `,"bootstrap_room":"abc"}`, true,
			400, bad, "bootstrap_room", "", `invalid type for "bootstrap_room": expected a non-negative integer, got string`},
		{"bootstrap_port_type", "POST", "/v1/chat/completions", `{` + msgs + `,"bootstrap_room":1,"bootstrap_port":"x"}`, true,
			400, bad, "bootstrap_port", "", `invalid type for "bootstrap_port": expected an integer, got string`},
		{"kv_transfer_params_type", "POST", "/v1/chat/completions", `{` + msgs + `,"kv_transfer_params":"x"}`, true,
			400, bad, "kv_transfer_params", "", `invalid type for "kv_transfer_params": expected an object, got string`},
		{"kv_transfer_params_room_type", "POST", "/v1/chat/completions", `{` + msgs + `,"kv_transfer_params":{"bootstrap_room":"abc"}}`, true,
			400, bad, "kv_transfer_params.bootstrap_room", "", `invalid type for "kv_transfer_params.bootstrap_room": expected a non-negative integer, got string`},
		{"no_route", "GET", "/nope", ``, false,
			404, "not_found_error", "", "", `no route for GET /nope`},
		{"no_route_post", "POST", "/v1/embeddings", `{}`, false,
			404, "not_found_error", "", "", `no route for POST /v1/embeddings`},
		{"chat_get", "GET", "/v1/chat/completions", ``, false,
			405, bad, "", "method_not_allowed", `use POST`},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			for i, c := range cases {
				if c.serversOnly && strings.HasPrefix(tg.name, "router") {
					continue
				}
				body := c.body
				if strings.Contains(body, "%d") {
					body = fmt.Sprintf(body, 3000+i)
				}
				req, _ := http.NewRequest(c.method, tg.url+c.path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var e struct{ Error *apiErr }
				if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
					t.Errorf("%s: %d, not an OpenAI error object: %s", c.name, resp.StatusCode, b)
					continue
				}
				got, want := e.Error, apiErr{Type: c.typ}
				if c.param != "" {
					want.Param = &c.param
				}
				if c.code != "" {
					want.Code = &c.code
				}
				if resp.StatusCode != c.status || got.Type != want.Type || orNull(got.Param) != orNull(want.Param) ||
					orNull(got.Code) != orNull(want.Code) || !strings.HasPrefix(got.Message, c.msg) {
					t.Errorf("%s: got %d type %q param %s code %s message %q;\nwant %d type %q param %s code %s message %q",
						c.name, resp.StatusCode, got.Type, orNull(got.Param), orNull(got.Code), got.Message,
						c.status, want.Type, orNull(want.Param), orNull(want.Code), c.msg)
				}
				if strings.Contains(got.Message, "Go ") || strings.Contains(got.Message, "RequestSampling") || strings.Contains(got.Message, "float64") {
					t.Errorf("%s: message names Go types: %q", c.name, got.Message)
				}
				if d := time.Since(t0); d > fast {
					t.Errorf("%s: answered after %v", c.name, d)
				}
			}
		})
	}
	if n := pd.p.Rooms().Live(); n != 0 {
		t.Errorf("%d live rooms left", n)
	}
}
