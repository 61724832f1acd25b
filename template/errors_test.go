package template

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEncoderErrors(t *testing.T) {
	user := Message{Role: "user", Content: "q"}
	call := func(id, args string) Message {
		return Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: "f", Arguments: args}}}}
	}
	tests := []struct {
		name string
		msgs []Message
		opts *Options
		want error
		v32  bool
	}{
		{"unknown role", []Message{{Role: "robot", Content: "x"}}, nil, ErrUnknownRole, false},
		{"unknown role v32", []Message{user, {Role: "latest_reminder", Content: "x"}}, nil, ErrUnknownRole, true},
		{"tool without call", []Message{user, {Role: "tool", Content: "r"}}, nil, ErrToolResultWithoutCall, false},
		{"tool with unknown id", []Message{user, call("a", `{}`), {Role: "tool", ToolCallID: "b", Content: "r"}}, nil, ErrToolResultWithoutCall, false},
		{"tool without call v32", []Message{user, {Role: "tool", Content: "r"}}, nil, ErrToolResultWithoutCall, true},
		{"too many results v32", []Message{user, call("a", `{}`), {Role: "tool", Content: "r"}, {Role: "tool", Content: "r"}}, nil, ErrToolResultWithoutCall, true},
		{"malformed arguments", []Message{user, call("a", `{"x": `)}, nil, ErrInvalidArguments, false},
		{"array arguments", []Message{user, call("a", `[1, 2]`)}, nil, ErrInvalidArguments, false},
		{"malformed arguments v32", []Message{user, call("a", `nope`)}, nil, ErrInvalidArguments, true},
		{"lenient non-object", []Message{user, call("a", `5`)}, &Options{LenientArguments: true}, ErrInvalidArguments, false},
		{"empty developer", []Message{{Role: "developer"}}, nil, ErrInvalidMessage, false},
		{"bad task", []Message{{Role: "user", Content: "x", Task: "dance"}}, nil, ErrInvalidMessage, false},
		{"image part", []Message{{Role: "user", ContentParts: []ContentPart{{Type: "text", Text: "see"}, {Type: "image_url"}}}}, nil, ErrInvalidMessage, false},
		{"call without name", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Arguments: "{}"}}}}}, nil, ErrInvalidMessage, false},
		{"bad effort", []Message{user}, &Options{ReasoningEffort: "extreme"}, ErrInvalidOption, false},
		{"effort on v32", []Message{user}, &Options{ReasoningEffort: "max"}, ErrInvalidOption, true},
		{"bad tool schema", []Message{{Role: "system", Tools: []Tool{{Type: "function", Function: json.RawMessage(`{"name": }`)}}}, user}, nil, ErrInvalidMessage, false},
		{"v32 assistant without reasoning", []Message{user, {Role: "assistant", Content: "a"}}, &Options{Thinking: true}, ErrInvalidMessage, true},
		{"output limit", []Message{{Role: "user", Content: strings.Repeat("x", 1000)}}, &Options{MaxOutputBytes: 100}, ErrLimit, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.v32 {
				_, err = EncodeV32(tc.msgs, tc.opts)
			} else {
				_, err = EncodeV4(tc.msgs, tc.opts)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var me *MessageError
			if errors.As(err, &me) && me.Err != tc.want {
				t.Errorf("MessageError.Err = %v", me.Err)
			}
		})
	}
}

func TestLenientArgumentsLikePython(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: `{"x": `}}}}}
	got, err := EncodeV4(msgs, &Options{LenientArguments: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `<｜DSML｜parameter name="arguments" string="true">{"x": </｜DSML｜parameter>`
	if !strings.Contains(got, want) {
		t.Errorf("got %q", got)
	}
}

func TestJinjaErrors(t *testing.T) {
	msgs := json.RawMessage(`[{"role": "user", "content": "hi"}]`)
	tests := []struct {
		name string
		src  string
		opts *JinjaOptions
		want error
	}{
		{"syntax: unclosed for", `{% for m in messages %}{{ m }}`, nil, ErrSyntax},
		{"syntax: bad expression", `{{ 1 + }}`, nil, ErrSyntax},
		{"syntax: unknown tag", `{% frobnicate %}`, nil, ErrSyntax},
		{"raise_exception", `{{ raise_exception('no system role') }}`, nil, ErrRender},
		{"huge range", `{% for i in range(1000000000) %}x{% endfor %}`, nil, ErrLimit},
		{"nested loops never end", `{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}`, &JinjaOptions{MaxSteps: 200_000}, ErrLimit},
		{"recursive macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, nil, ErrLimit},
		{"output size", `{% for i in range(100000) %}{{ 'abcdefghij' * 100 }}{% endfor %}`, &JinjaOptions{MaxOutputBytes: 1 << 20}, ErrLimit},
		{"output in macro", `{% macro f() %}{% for i in range(100000) %}{% for j in range(100) %}{{ 'abcdefghij' }}{% endfor %}{% endfor %}{% endmacro %}{{ f() }}`, &JinjaOptions{MaxOutputBytes: 1 << 20}, ErrLimit},
		{"time", `{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}`, &JinjaOptions{MaxDuration: 50 * time.Millisecond, MaxSteps: 1 << 40, MaxOutputBytes: 1 << 40}, ErrLimit},
		{"unserializable", `{{ raise_exception | tojson }}`, nil, ErrUnserializable},
		{"sandbox: append", `{% set l = [] %}{{ l.append(1) }}`, nil, ErrRender},
		{"deep brackets", "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}", nil, ErrLimit},
		{"deep blocks", strings.Repeat("{% if true %}", 5000) + strings.Repeat("{% endif %}", 5000), nil, ErrLimit},
		{"huge source", strings.Repeat("x", MaxTemplateBytes+1), nil, ErrLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJinja(tc.src, tc.opts)
			if err == nil {
				_, err = j.RenderChat(context.Background(), &JinjaInput{Messages: msgs})
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestJinjaRaiseExceptionMessage(t *testing.T) {
	j, err := ParseJinja(`{% if messages[0].role != 'system' %}{{ raise_exception('Conversation must start with a system message') }}{% endif %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.RenderChat(context.Background(), &JinjaInput{Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)})
	if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "Conversation must start with a system message") {
		t.Fatalf("got %v", err)
	}
}

func TestJinjaContextCancelled(t *testing.T) {
	j, err := ParseJinja(`{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Render(ctx, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("got %v", err)
	}
}

func TestJinjaStrftimeNow(t *testing.T) {
	fixed := time.Date(2026, 2, 7, 9, 5, 3, 0, time.UTC)
	j, err := ParseJinja(`{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %-d %b %a %y %I%p %j %%') }}`, &JinjaOptions{Now: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Python: datetime(2026,2,7,9,5,3).strftime(same format)
	want := "2026-02-07 09:05:03 Saturday February 7 Feb Sat 26 09AM 038 %"
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
}
