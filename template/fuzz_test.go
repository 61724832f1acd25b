package template

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// typed reports whether err wraps one of the package's sentinels.
func typed(err error) bool {
	for _, s := range []error{ErrUnknownRole, ErrInvalidMessage, ErrToolResultWithoutCall, ErrInvalidArguments,
		ErrInvalidOption, ErrInvalidRequest, ErrSyntax, ErrRender, ErrUnserializable, ErrLimit} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FuzzRequest renders random OpenAI request bodies with the native V4 and
// V3.2 encoders: no panic, and every error is typed.
func FuzzRequest(f *testing.F) {
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}]}`))
	f.Add([]byte(`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q", "task": "action"}, {"role": "assistant", "content": "a", "reasoning_content": "r", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{\"a\": [1, {\"b\": 2.5}]}"}}]}, {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "x"}]}, {"role": "latest_reminder", "content": "d"}, {"role": "developer", "content": "dev", "response_format": {"type": "json_object"}}], "tools": [` + weatherTool + `], "chat_template_kwargs": {"thinking": true}, "reasoning_effort": "max"}`))
	for n := 1; n <= 4; n++ {
		if data, err := os.ReadFile(filepath.Join("testdata", "official", "v4", "test_input_"+string(rune('0'+n))+".json")); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseChatRequest(body)
		if err != nil {
			var se *json.SyntaxError
			if !typed(err) && !errors.As(err, &se) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, keep := range []bool{false, true} {
			for _, r := range []Renderer{&V4Renderer{Opts: Options{KeepThinking: keep}}, &V32Renderer{Opts: Options{KeepThinking: keep}}} {
				if _, err := r.Render(context.Background(), req); err != nil && !typed(err) {
					t.Fatalf("untyped error %v", err)
				}
			}
		}
	})
}

// FuzzJinja compiles and renders random templates with small limits: no
// panic, no hang, and every error is typed.
func FuzzJinja(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "deepseek-v3", "tokenizer_config.json"))
	if err == nil {
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if json.Unmarshal(data, &cfg) == nil {
			f.Add(cfg.ChatTemplate, `[{"role": "user", "content": "hi"}]`)
		}
	}
	probes, _ := filepath.Glob(filepath.Join("testdata", "jinja", "*.jinja"))
	for _, p := range probes {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(string(src), `[{"role": "system", "content": "s"}, {"role": "user", "content": " a b "}]`)
		}
	}
	f.Add(`{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}`, `[]`)
	f.Add(`{{ messages | tojson(indent=2, sort_keys=true) }}{{ 'x'.split() }}`, `[{"b": 1, "a": {}}]`)
	for _, b := range valueBombs {
		f.Add(b.src, `[]`)
	}
	f.Add(`{{ 1 // 0 }}{{ foo.bar.baz }}`, `[]`)
	f.Add(`{% set ns = namespace() %}{% for m in messages %}{% set ns.n = ns %}{% endfor %}{{ ns.n }}{{ ns == ns.n }}`, `[{"role": "user", "content": "x"}]`)
	f.Fuzz(func(t *testing.T, src, messages string) {
		j, err := ParseJinja(src, &JinjaOptions{MaxOutputBytes: 1 << 16, MaxSteps: 10_000, MaxDuration: time.Second})
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		_, err = j.RenderChat(context.Background(), &JinjaInput{Messages: json.RawMessage(messages),
			SpecialTokens: map[string]string{"bos_token": "<s>"}})
		if err != nil && !typed(err) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
