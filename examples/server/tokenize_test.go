package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
)

// recBackend is the scripted backend that records the ids each sequence
// was prefilled with (all chunks), in order of sequence creation.
type recBackend struct {
	*scriptBackend
	mu      sync.Mutex
	prompts map[dsv4.BackendSequence]*[]int32
	order   []dsv4.BackendSequence
}

func (b *recBackend) NewSequence() dsv4.BackendSequence {
	s := b.scriptBackend.NewSequence()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prompts[s] = new([]int32)
	b.order = append(b.order, s)
	return s
}

func (b *recBackend) Prefill(ctx context.Context, s dsv4.BackendSequence, ids []int32) ([]float32, error) {
	b.mu.Lock()
	p := b.prompts[s]
	*p = append(*p, ids...)
	b.mu.Unlock()
	return b.scriptBackend.Prefill(ctx, s, ids)
}

// lastPrompt is the prefill of the most recently created sequence.
func (b *recBackend) lastPrompt(t *testing.T) []int32 {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		t.Fatal("no sequence was prefilled")
	}
	return slices.Clone(*b.prompts[b.order[len(b.order)-1]])
}

type recServer struct {
	*httptest.Server
	eng *dsv4.Engine
	b   *recBackend
}

func startRecServer(t *testing.T, cfg ServerConfig) *recServer {
	t.Helper()
	b := &recBackend{scriptBackend: &scriptBackend{tok: v4Tokenizer(t)}, prompts: map[dsv4.BackendSequence]*[]int32{}}
	// Several prefill chunks; no prefix caching, so that every prompt is
	// prefilled whole into a new sequence (the one recorded).
	eng, err := dsv4.NewEngineWithBackend(b, dsv4.EngineOptions{Tokenizer: b.tok, StepTokens: 7, PrefixCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "dsv4-script"
	}
	hs := httptest.NewServer(NewServer(eng, cfg).Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
	})
	return &recServer{Server: hs, eng: eng, b: b}
}

type tokenizeOut struct {
	Count       int       `json:"count"`
	MaxModelLen int       `json:"max_model_len"`
	Tokens      []int32   `json:"tokens"`
	TokenStrs   *[]string `json:"token_strs"`
}

func tokenizeOK(t *testing.T, url, body string) tokenizeOut {
	t.Helper()
	code, b := post(t, url, "/tokenize", body)
	if code != http.StatusOK {
		t.Fatalf("/tokenize %s: %d %s", body, code, b)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["token_strs"]) != "null" || raw["tokens"] == nil || raw["count"] == nil || raw["max_model_len"] == nil {
		t.Fatalf("/tokenize answer shape: %s", b)
	}
	var out tokenizeOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Count != len(out.Tokens) {
		t.Fatalf("count %d, %d tokens", out.Count, len(out.Tokens))
	}
	return out
}

func detokenizeOK(t *testing.T, url string, ids []int32) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tokens": ids})
	code, b := post(t, url, "/detokenize", string(body))
	if code != http.StatusOK {
		t.Fatalf("/detokenize: %d %s", code, b)
	}
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Prompt == nil {
		t.Fatalf("/detokenize answer %s: %v", b, err)
	}
	return *out.Prompt
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestTokenizePromptMatchesCompletions: /tokenize of a prompt gives the ids
// that /v1/completions prefills for it, with either add_special_tokens.
func TestTokenizePromptMatchesCompletions(t *testing.T) {
	ts := startRecServer(t, ServerConfig{})
	for _, tc := range []struct{ name, prompt string }{
		{"ascii", "The quick brown fox jumps over the lazy dog."},
		{"non-ascii", "Grüße aus Köln — 你好，世界! 🚀 naïve café"},
		{"special tokens", "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>"},
		{"whitespace", "  two  spaces\n\ttab\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tokenizeOK(t, ts.URL, `{"prompt": `+jsonString(tc.prompt)+`}`)
			if got.MaxModelLen != ts.eng.MaxContext() {
				t.Errorf("max_model_len %d, want %d", got.MaxModelLen, ts.eng.MaxContext())
			}
			for _, ast := range []string{"true", "false"} {
				again := tokenizeOK(t, ts.URL, `{"model": "dsv4-script", "add_special_tokens": `+ast+`, "prompt": `+jsonString(tc.prompt)+`}`)
				if !slices.Equal(again.Tokens, got.Tokens) {
					t.Errorf("add_special_tokens %s: %v, default %v", ast, again.Tokens, got.Tokens)
				}
			}
			code, b := post(t, ts.URL, "/v1/completions", `{"max_tokens": 1, "temperature": 0, "prompt": `+jsonString(tc.prompt)+`}`)
			if code != http.StatusOK {
				t.Fatalf("completions: %d %s", code, b)
			}
			var resp struct {
				Usage dsv4.Usage `json:"usage"`
			}
			if err := json.Unmarshal(b, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Usage.PromptTokens != got.Count {
				t.Errorf("completions usage.prompt_tokens %d, tokenize count %d", resp.Usage.PromptTokens, got.Count)
			}
			if pre := ts.b.lastPrompt(t); !slices.Equal(pre, got.Tokens) {
				t.Errorf("completions prefilled %v\n/tokenize gave       %v", pre, got.Tokens)
			}
		})
	}
	// The empty prompt tokenizes to no ids (completions refuse it).
	if got := tokenizeOK(t, ts.URL, `{"prompt": ""}`); got.Count != 0 || got.Tokens == nil {
		t.Errorf("empty prompt: %+v", got)
	}
}

// TestTokenizeChatMatchesChatPrompt: /tokenize of messages gives
// Engine.ChatPrompt's ids for the same request body, and those are what
// /v1/chat/completions prefills.
func TestTokenizeChatMatchesChatPrompt(t *testing.T) {
	ts := startRecServer(t, ServerConfig{})
	tools := `[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]`
	for _, tc := range []struct{ name, fields string }{
		{"user", `"messages": [{"role": "user", "content": "Hello there"}]`},
		{"system and turns", `"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Grüße 世界 🚀"}]`},
		{"explicit defaults", `"add_generation_prompt": true, "continue_final_message": false, "add_special_tokens": false, "messages": [{"role": "user", "content": "x"}]`},
		{"add_special_tokens", `"add_special_tokens": true, "messages": [{"role": "user", "content": "x"}]`},
		{"thinking", `"chat_template_kwargs": {"thinking": true}, "messages": [{"role": "user", "content": "count 3"}]`},
		{"reasoning_effort", `"reasoning_effort": "max", "chat_template_kwargs": {"thinking": true}, "messages": [{"role": "user", "content": "x"}]`},
		{"tools", `"tools": ` + tools + `, "messages": [{"role": "user", "content": "weather in Paris"}]`},
		{"tool_choice required", `"tools": ` + tools + `, "tool_choice": "required", "messages": [{"role": "user", "content": "hi"}]`},
		{"tool_choice none", `"tools": ` + tools + `, "tool_choice": "none", "messages": [{"role": "user", "content": "hi"}]`},
		{"response_format", `"response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "hi"}]`},
		{"add_generation_prompt false", `"add_generation_prompt": false, "messages": [{"role": "user", "content": "hi"}]`},
		{"trailing assistant", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "You said"}]`},
		{"continue_final_message", `"continue_final_message": true, "add_generation_prompt": false, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "You said"}]`},
		{"continue_final_message agp absent", `"continue_final_message": true, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "You said"}]`},
		{"continue_final_message thinking", `"continue_final_message": true, "chat_template_kwargs": {"thinking": true}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "reasoning_content": "Thinking"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model": "dsv4-script", ` + tc.fields + `}`
			got := tokenizeOK(t, ts.URL, body)
			var req dsv4.ChatRequest
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			want, err := ts.eng.ChatPrompt(&req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Tokens, want) {
				t.Fatalf("/tokenize %v\nChatPrompt %v", got.Tokens, want)
			}
			code, b := post(t, ts.URL, "/v1/chat/completions", `{"max_tokens": 1, "temperature": 0, `+tc.fields+`}`)
			if code != http.StatusOK {
				t.Fatalf("chat: %d %s", code, b)
			}
			if pre := ts.b.lastPrompt(t); !slices.Equal(pre, got.Tokens) {
				t.Errorf("chat prefilled %v\n/tokenize gave %v", pre, got.Tokens)
			}
		})
	}
}

// TestDetokenizeRoundTrip: detokenize(tokenize(x)) == x.
func TestDetokenizeRoundTrip(t *testing.T) {
	ts := startRecServer(t, ServerConfig{})
	for _, text := range []string{
		"",
		"Hello, world!",
		"line one\nline two\ttabbed  ",
		"Grüße aus Köln",
		"你好，世界",
		"emoji 🚀🧪 and combining é",
		"<｜User｜>special<｜Assistant｜><think>r</think>",
		"｜DSML｜ mixed Ω≈ç√ text",
	} {
		t.Run(text, func(t *testing.T) {
			tok := tokenizeOK(t, ts.URL, `{"prompt": `+jsonString(text)+`}`)
			if got := detokenizeOK(t, ts.URL, tok.Tokens); got != text {
				t.Errorf("round trip %q -> %v -> %q", text, tok.Tokens, got)
			}
		})
	}
	// A token split inside a UTF-8 sequence decodes lossily, as the stream
	// would show it at the end of a generation.
	tok := tokenizeOK(t, ts.URL, `{"prompt": "🚀"}`)
	if len(tok.Tokens) > 1 {
		if got := detokenizeOK(t, ts.URL, tok.Tokens[:1]); !strings.Contains(got, "\ufffd") {
			t.Errorf("partial UTF-8: %q", got)
		}
	}
}

// TestTokenizeErrors: OpenAI error objects with the field at fault.
func TestTokenizeErrors(t *testing.T) {
	ts := startRecServer(t, ServerConfig{MaxBodyBytes: 4096})
	user := `"messages": [{"role": "user", "content": "x"}]`
	asst := `"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]`
	for _, tc := range []struct {
		name, path, body string
		status           int
		param, code      string
	}{
		{"malformed", "/tokenize", `{"prompt": `, 400, "", ""},
		{"not an object", "/tokenize", `[1]`, 400, "", ""},
		{"unknown model", "/tokenize", `{"model": "gpt-4", "prompt": "x"}`, 404, "model", "model_not_found"},
		{"prompt not a string", "/tokenize", `{"prompt": ["a", "b"]}`, 400, "prompt", ""},
		{"prompt ids", "/tokenize", `{"prompt": [1, 2]}`, 400, "prompt", ""},
		{"neither", "/tokenize", `{"model": "dsv4-script"}`, 400, "prompt", ""},
		{"both", "/tokenize", `{"prompt": "x", ` + user + `}`, 400, "messages", ""},
		{"add_special_tokens type", "/tokenize", `{"prompt": "x", "add_special_tokens": "yes"}`, 400, "add_special_tokens", ""},
		{"empty messages", "/tokenize", `{"messages": []}`, 400, "messages", ""},
		{"bad role", "/tokenize", `{"messages": [{"role": "robot", "content": "x"}]}`, 400, "messages[0].role", ""},
		{"bad tool", "/tokenize", `{"tools": [{"type": "function", "function": {"name": "bad name!"}}], ` + user + `}`, 400, "tools[0].function.name", ""},
		{"continue and generation prompt", "/tokenize", `{"continue_final_message": true, "add_generation_prompt": true, ` + asst + `}`, 400, "continue_final_message", ""},
		{"continue_final_message user last", "/tokenize", `{"continue_final_message": true, "add_generation_prompt": false, ` + user + `}`, 400, "continue_final_message", ""},
		{"continue_final_message user last agp absent", "/tokenize", `{"continue_final_message": true, ` + user + `}`, 400, "continue_final_message", ""},
		{"continue_final_message tool calls", "/tokenize", `{"continue_final_message": true, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}`, 400, "continue_final_message", ""},
		{"add_generation_prompt type", "/tokenize", `{"add_generation_prompt": "no", ` + user + `}`, 400, "add_generation_prompt", ""},
		{"chat continue and generation prompt", "/v1/chat/completions", `{"continue_final_message": true, "add_generation_prompt": true, ` + asst + `}`, 400, "continue_final_message", ""},
		{"chat continue user last", "/v1/chat/completions", `{"continue_final_message": true, ` + user + `}`, 400, "continue_final_message", ""},
		{"too large", "/tokenize", `{"prompt": "` + strings.Repeat("a", 5000) + `"}`, 413, "", "request_too_large"},
		{"detok unknown model", "/detokenize", `{"model": "gpt-4", "tokens": [1]}`, 404, "model", "model_not_found"},
		{"detok missing", "/detokenize", `{}`, 400, "tokens", ""},
		{"detok null", "/detokenize", `{"tokens": null}`, 400, "tokens", ""},
		{"detok not ints", "/detokenize", `{"tokens": [1, "a"]}`, 400, "tokens", ""},
		{"detok over int32", "/detokenize", `{"tokens": [99999999999]}`, 400, "tokens", ""},
		{"detok out of vocab", "/detokenize", `{"tokens": [1, 1000000]}`, 400, "tokens", ""},
		{"detok negative", "/detokenize", `{"tokens": [-1]}`, 400, "tokens", ""},
		{"detok vocab size", "/detokenize", `{"tokens": [129280]}`, 400, "tokens", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := post(t, ts.URL, tc.path, tc.body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%d %s: not an OpenAI error (%v)", code, b, err)
			}
			param, ecode := "", ""
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if e.Error.Code != nil {
				ecode = *e.Error.Code
			}
			if code != tc.status || param != tc.param || ecode != tc.code {
				t.Errorf("got %d param %q code %q (%s); want %d param %q code %q", code, param, ecode, b, tc.status, tc.param, tc.code)
			}
		})
	}
	for _, path := range []string{"/tokenize", "/detokenize"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("GET %s: %d Allow %q", path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

func get(t *testing.T, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestModelByID: GET /v1/models/{id} answers the entry of /v1/models for
// the served name and its aliases, and 404 model_not_found otherwise.
func TestModelByID(t *testing.T) {
	ts := startRecServer(t, ServerConfig{Aliases: []string{"models/dsv4-script", "/abs/ckpt"}})
	code, b := get(t, ts.URL+"/v1/models")
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &list); code != 200 || err != nil || len(list.Data) != 1 {
		t.Fatalf("/v1/models: %d %s", code, b)
	}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"served name", "/v1/models/dsv4-script", 200},
		{"alias with slash", "/v1/models/models/dsv4-script", 200},
		{"escaped alias", "/v1/models/models%2Fdsv4-script", 200},
		{"absolute alias escaped", "/v1/models/%2Fabs%2Fckpt", 200},
		{"unknown", "/v1/models/gpt-4", 404},
		{"empty", "/v1/models/", 404},
		{"prefix only", "/v1/models/dsv4", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := get(t, ts.URL+tc.path)
			if code != tc.status {
				t.Fatalf("%d %s", code, b)
			}
			if code == 200 {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				if !equalJSON(m, list.Data[0]) {
					t.Errorf("%v, list entry %v", m, list.Data[0])
				}
				return
			}
			var e struct {
				Error struct {
					Param, Code, Type string
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != "model_not_found" || e.Error.Param != "model" || e.Error.Type != "invalid_request_error" {
				t.Errorf("not found answer: %s", b)
			}
		})
	}
	resp, err := http.Post(ts.URL+"/v1/models/dsv4-script", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/models/{id}: %d", resp.StatusCode)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestVersion: GET /version answers {"version": "..."}, without a key.
func TestVersion(t *testing.T) {
	ts := startRecServer(t, ServerConfig{APIKey: "sekrit"})
	code, b := get(t, ts.URL+"/version")
	var v map[string]string
	if err := json.Unmarshal(b, &v); code != 200 || err != nil || v["version"] == "" || len(v) != 1 {
		t.Fatalf("/version: %d %s", code, b)
	}
	if code, _ := post(t, ts.URL, "/version", "{}"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /version: %d", code)
	}
}

// TestUtilityEndpointsAuth: /tokenize, /detokenize and /v1/models/{id}
// need the API key (as /v1/*; SGLang guards every route but /health and
// /metrics); /version and /health do not.
func TestUtilityEndpointsAuth(t *testing.T) {
	ts := startRecServer(t, ServerConfig{APIKey: "sekrit"})
	for _, path := range []string{"/tokenize", "/detokenize"} {
		if code, _ := post(t, ts.URL, path, `{"prompt": "x", "tokens": [1]}`); code != http.StatusUnauthorized {
			t.Errorf("%s without key: %d", path, code)
		}
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(`{"prompt": "x", "tokens": [1]}`))
		req.Header.Set("Authorization", "Bearer sekrit")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s with key: %d", path, resp.StatusCode)
		}
	}
	if code, _ := get(t, ts.URL+"/v1/models/dsv4-script"); code != http.StatusUnauthorized {
		t.Errorf("/v1/models/{id} without key: %d", code)
	}
	if code, _ := get(t, ts.URL+"/v1/models/dsv4-script", "Authorization", "Bearer sekrit"); code != http.StatusOK {
		t.Errorf("/v1/models/{id} with key: %d", code)
	}
}

// TestChatEndingFields: add_generation_prompt and continue_final_message
// on /v1/chat/completions (stream and not) and /tokenize, against the
// scripted model: the prompt text /tokenize gives, and the reply (only the
// continuation of a continued message, as vLLM returns it).
func TestChatEndingFields(t *testing.T) {
	ts := startRecServer(t, ServerConfig{})
	B, E := "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
	for _, tc := range []struct {
		name, fields, prompt, content, reasoning string
	}{
		{"continue chat", `"continue_final_message": true, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "You said"}]`,
			B + "<｜User｜>hi<｜Assistant｜></think>You said", ": hi", ""},
		{"continue inside reasoning", `"continue_final_message": true, "add_generation_prompt": false, "chat_template_kwargs": {"thinking": true}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "reasoning_content": "Thinking about"}]`,
			B + "<｜User｜>hi<｜Assistant｜><think>Thinking about", "You said: hi", " it."},
		{"continue after reasoning", `"continue_final_message": true, "chat_template_kwargs": {"thinking": true}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "reasoning": "Thinking about it.", "content": "You"}]`,
			B + "<｜User｜>hi<｜Assistant｜><think>Thinking about it.</think>You", " said: hi", ""},
		{"trailing assistant opens a turn", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]`,
			B + "<｜User｜>hi<｜Assistant｜></think>Hello" + E + "<｜Assistant｜></think>", "You said: hi<｜Assistant｜></think>Hello", ""}, // the script echoes the text since the last user token; its EOS ends the reply
		{"add_generation_prompt false", `"add_generation_prompt": false, "messages": [{"role": "user", "content": "hi"}]`,
			B + "<｜User｜>hi", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tokenizeOK(t, ts.URL, `{`+tc.fields+`}`)
			if got := detokenizeOK(t, ts.URL, tok.Tokens); got != tc.prompt {
				t.Errorf("/tokenize prompt %q, want %q", got, tc.prompt)
			}
			for _, stream := range []bool{false, true} {
				body := `{"temperature": 0, "max_tokens": 32, ` + tc.fields + `}`
				if stream {
					body = `{"stream": true, "temperature": 0, "max_tokens": 32, ` + tc.fields + `}`
				}
				code, b := post(t, ts.URL, "/v1/chat/completions", body)
				if code != http.StatusOK {
					t.Fatalf("chat: %d %s", code, b)
				}
				if pre := ts.b.lastPrompt(t); !slices.Equal(pre, tok.Tokens) {
					t.Errorf("chat prefilled %v, /tokenize %v", pre, tok.Tokens)
				}
				content, reasoning := chatText(t, b, stream)
				if content != tc.content || reasoning != tc.reasoning {
					t.Errorf("stream %v: content %q reasoning %q; want %q %q", stream, content, reasoning, tc.content, tc.reasoning)
				}
			}
		})
	}
}

// chatText extracts the first choice's content and reasoning_content from
// a chat response body or an SSE stream.
func chatText(t *testing.T, b []byte, stream bool) (string, string) {
	t.Helper()
	type msg struct {
		Content          *string `json:"content"`
		ReasoningContent *string `json:"reasoning_content"`
	}
	var content, reasoning string
	add := func(m msg) {
		if m.Content != nil {
			content += *m.Content
		}
		if m.ReasoningContent != nil {
			reasoning += *m.ReasoningContent
		}
	}
	if !stream {
		var r struct {
			Choices []struct {
				Message msg `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) == 0 {
			t.Fatalf("response %s: %v", b, err)
		}
		add(r.Choices[0].Message)
		return content, reasoning
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta msg `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			add(ch.Delta)
		}
	}
	return content, reasoning
}

// TestTokenizeTokenStrs: return_token_strs true adds token_strs, the
// tokens' strings as vLLM returns them (transformers'
// convert_ids_to_tokens): byte-level alphabet for base tokens ("Ġhello"
// for " hello"), an added token's content; prompt and chat forms.
func TestTokenizeTokenStrs(t *testing.T) {
	ts := startServer(t, ServerConfig{}, dsv4.EngineOptions{}, 0)
	for _, tc := range []struct{ name, body, want string }{
		{"prompt", `{"prompt": "Hello hello world", "return_token_strs": true}`, "Ġhello"},
		{"special", `{"prompt": "<｜User｜>héllo", "return_token_strs": true}`, "<｜User｜>"},
		{"chat", `{"messages": [{"role": "user", "content": "hi there"}], "return_token_strs": true}`, "Ġthere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := post(t, ts.URL, "/tokenize", tc.body)
			var out tokenizeOut
			if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil || out.TokenStrs == nil {
				t.Fatalf("%d %s %v", code, b, err)
			}
			strs := *out.TokenStrs
			if len(strs) != len(out.Tokens) || !slices.Contains(strs, tc.want) {
				t.Fatalf("token_strs %q for %v, want %q among them", strs, out.Tokens, tc.want)
			}
			for i, id := range out.Tokens {
				if s, ok := ts.b.tok.Token(id); !ok || s != strs[i] {
					t.Errorf("token %d (%d): %q, vocabulary %q", i, id, strs[i], s)
				}
			}
		})
	}
}
