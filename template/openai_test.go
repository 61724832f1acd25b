package template

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const weatherTool = `{"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & later", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`

func TestParseChatRequestMapping(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		thinking bool
		effort   string
		roles    string // roles of EncoderMessages, with "+tools" where tools attach
	}{
		{"tools to system", `{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}], "tools": [` + weatherTool + `]}`, false, "", "system+tools,user"},
		{"system inserted", `{"messages": [{"role": "user", "content": "q"}], "tools": [` + weatherTool + `]}`, false, "", "system+tools,user"},
		{"no tools", `{"messages": [{"role": "user", "content": "q"}], "tools": []}`, false, "", "user"},
		{"thinking kwarg", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": true}}`, true, "", "user"},
		{"enable_thinking kwarg", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"enable_thinking": true}}`, true, "", "user"},
		{"effort max", `{"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "max"}`, false, "max", "user"},
		{"effort xhigh", `{"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "xhigh"}`, false, "max", "user"},
		{"effort medium", `{"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "medium"}`, false, "", "user"},
		{"effort kwarg", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"reasoning_effort": "high"}}`, false, "high", "user"},
		// Jinja truthiness of the switch (Truthy), as apply_chat_template.
		{"thinking yes", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": "yes"}}`, true, "", "user"},
		{"thinking string false", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": "false"}}`, true, "", "user"},
		{"thinking 1", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": 1}}`, true, "", "user"},
		{"thinking 0", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": 0}}`, false, "", "user"},
		{"thinking empty string", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": ""}}`, false, "", "user"},
		{"thinking null", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": null}}`, false, "", "user"},
		{"thinking wins over enable_thinking", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"thinking": [], "enable_thinking": true}}`, false, "", "user"},
		{"enable_thinking object", `{"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": {"enable_thinking": {"a": 1}}}`, true, "", "user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseChatRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if req.Thinking != tc.thinking || req.ReasoningEffort != tc.effort {
				t.Errorf("thinking=%v effort=%q", req.Thinking, req.ReasoningEffort)
			}
			var roles []string
			for _, m := range req.EncoderMessages() {
				r := m.Role
				if len(m.Tools) > 0 {
					r += "+tools"
				}
				roles = append(roles, r)
			}
			if got := strings.Join(roles, ","); got != tc.roles {
				t.Errorf("roles %q, want %q", got, tc.roles)
			}
		})
	}
}

func TestParseChatRequestErrors(t *testing.T) {
	for _, body := range []string{
		`not json`,
		`{}`,
		`{"messages": "hi"}`,
		`{"messages": [{"role": "user", "content": 5}]}`,
		`{"messages": []}`,
		`{"messages": [], "chat_template_kwargs": {"thinking": true}}`,
		`{"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]}`,
		`{"messages": [{"role": "user", "content": "q"}], "reasoning_effort": "ludicrous"}`,
	} {
		if _, err := ParseChatRequest([]byte(body)); err == nil || !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: got %v", body, err)
		}
	}
}

func TestRenderRequestV4(t *testing.T) {
	body := `{"model": "m", "messages": [
		{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
		{"role": "assistant", "content": null, "reasoning": "Use the tool.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
		"tools": [` + weatherTool + `], "chat_template_kwargs": {"thinking": true}}`
	req, err := ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&V4Renderer{}).Render(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := BOS + "\n\n" + v4ToolsHead +
		`{"name": "get_weather", "description": "Weather <now> & later", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}` +
		v4ToolsTail + "<｜User｜>Weather in Paris?<｜Assistant｜><think>Use the tool.</think>\n\n<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS +
		"<｜User｜><tool_result>sunny</tool_result><｜Assistant｜><think>"
	if got != want {
		t.Errorf("mismatch\n%s", firstDiff(got, want))
	}
}

func TestLoadRenderer(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req, err := ParseChatRequest([]byte(`{"messages": [{"role": "user", "content": "Hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	write("config.json", `{"model_type": "deepseek_v4"}`)
	r, err := LoadRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Render(context.Background(), req); got != BOS+"<｜User｜>Hi<｜Assistant｜></think>" {
		t.Errorf("v4: %q", got)
	}
	write("config.json", `{"model_type": "deepseek_v32"}`)
	if r, err = LoadRenderer(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Render(context.Background(), req); got != BOS+"<｜User｜>Hi<｜Assistant｜></think>" {
		t.Errorf("v32: %q", got)
	}
	write("config.json", `{"model_type": "deepseek_v3"}`)
	if _, err = LoadRenderer(dir); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("no template: %v", err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "deepseek-v3", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	write("tokenizer_config.json", string(data))
	if r, err = LoadRenderer(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Render(context.Background(), req); got != BOS+"<｜User｜>Hi<｜Assistant｜>" {
		t.Errorf("v3 jinja: %q", got)
	}
}

func TestMessageJSONRoundTrip(t *testing.T) {
	in := `[{"role":"assistant","content":null,"reasoning":"r","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"b":1,"a":[2]}}}]},` +
		`{"role":"tool","tool_call_id":"1","content":[{"type":"text","text":"x"}]},{"role":"user","content":"q","task":"query","wo_eos":true}]`
	var msgs []Message
	if err := json.Unmarshal([]byte(in), &msgs); err != nil {
		t.Fatal(err)
	}
	if msgs[0].ReasoningContent != "r" || msgs[0].ToolCalls[0].Function.Arguments != `{"b":1,"a":[2]}` || msgs[1].ContentParts[0].Text != "x" || msgs[2].Task != "query" || !msgs[2].WoEOS {
		t.Fatalf("decoded %+v", msgs)
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":[2]}"}}]},` +
		`{"role":"tool","content":[{"type":"text","text":"x"}],"tool_call_id":"1"},{"role":"user","content":"q","task":"query","wo_eos":true}]`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestJinjaConcurrent(t *testing.T) {
	j := loadV3Template(t)
	in := &JinjaInput{Messages: json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}]`),
		AddGenerationPrompt: true, SpecialTokens: map[string]string{"bos_token": BOS}}
	want, err := j.RenderChat(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 16)
	for range 16 {
		go func() {
			got, err := j.RenderChat(context.Background(), in)
			if err != nil {
				got = err.Error()
			}
			done <- got
		}()
	}
	for range 16 {
		if got := <-done; got != want {
			t.Errorf("concurrent render: %q", got)
		}
	}
}

// TestTruthy checks Jinja's (Python's) truth value of decoded JSON values
// and of the Go values a caller may put in chat_template_kwargs.
func TestTruthy(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, false},
		{"true", true, true},
		{"false", false, false},
		{"string", "yes", true},
		{"string false", "false", true},
		{"string 0", "0", true},
		{"empty string", "", false},
		{"float", 0.5, true},
		{"float 0", 0.0, false},
		{"json.Number", json.Number("2"), true},
		{"json.Number 0", json.Number("0.0"), false},
		{"array", []any{false}, true},
		{"empty array", []any{}, false},
		{"object", map[string]any{"k": nil}, true},
		{"empty object", map[string]any{}, false},
		{"raw true", json.RawMessage(`true`), true},
		{"raw empty array", json.RawMessage(` [] `), false},
		{"raw string", json.RawMessage(`"no"`), true},
		{"go int", 3, true},
		{"go int 0", 0, false},
		{"go uint8 0", uint8(0), false},
		{"go slice", []string{"a"}, true},
		{"go empty map", map[string]int{}, false},
		{"nil pointer", (*bool)(nil), false},
		{"pointer to false", new(bool), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Truthy(tc.v); got != tc.want {
				t.Errorf("Truthy(%#v) = %v, want %v", tc.v, got, tc.want)
			}
		})
	}
}
