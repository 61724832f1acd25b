package dsv4

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// wantParam checks that err is a *ParamError wrapping ErrInvalidParams that
// names param, or nil when param is "".
func wantParam(t *testing.T, err error, param string) {
	t.Helper()
	if param == "" {
		if err != nil {
			t.Fatalf("valid request refused: %v", err)
		}
		return
	}
	var pe *ParamError
	if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("got %v, want a ParamError for %s", err, param)
	}
	if pe.Param != param {
		t.Errorf("param %q, want %q (%v)", pe.Param, param, err)
	}
}

// drain runs a chunk iterator to its end.
func drain(t *testing.T, stream func(func(*ChatChunk, error) bool)) {
	t.Helper()
	for _, err := range stream {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepetitionPenaltyRange: vLLM refuses repetition_penalty <= 0 with a
// 400; an explicit 0 on the wire is refused too (SamplingParams reads 0 as
// unset), for chat and completions alike.
func TestRepetitionPenaltyRange(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, field, param string // field "" = absent; param "" = valid
	}{
		{"absent", ``, ""},
		{"1", `"repetition_penalty":1`, ""},
		{"small", `"repetition_penalty":0.01`, ""},
		{"10", `"repetition_penalty":10`, ""},
		{"null", `"repetition_penalty":null`, ""},
		{"0", `"repetition_penalty":0`, "repetition_penalty"},
		{"0.0", `"repetition_penalty":0.0`, "repetition_penalty"},
		{"-0", `"repetition_penalty":-0`, "repetition_penalty"},
		{"negative", `"repetition_penalty":-1`, "repetition_penalty"},
		{"too big", `"repetition_penalty":10.5`, "repetition_penalty"},
	} {
		extra := ""
		if tc.field != "" {
			extra = "," + tc.field
		}
		t.Run("chat "+tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2`+extra+`}`), &r); err != nil {
				t.Fatal(err)
			}
			_, err := e.Chat(context.Background(), &r)
			wantParam(t, err, tc.param)
		})
		t.Run("completions "+tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2`+extra+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err == nil {
				drain(t, s)
			}
		})
	}
}

// TestThinkingTruthiness: chat_template_kwargs.thinking / enable_thinking
// select thinking mode by Jinja's truthiness, as apply_chat_template's
// kwargs do in a template's `{% if thinking %}`.
func TestThinkingTruthiness(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("r</think>ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, kwargs string
		thinking     bool
	}{
		{"absent", `{}`, false},
		{"true", `{"thinking":true}`, true},
		{"false", `{"thinking":false}`, false},
		{"yes", `{"thinking":"yes"}`, true},
		{"string false", `{"thinking":"false"}`, true},
		{"empty string", `{"thinking":""}`, false},
		{"1", `{"thinking":1}`, true},
		{"0", `{"thinking":0}`, false},
		{"0.5", `{"thinking":0.5}`, true},
		{"null", `{"thinking":null}`, false},
		{"list", `{"thinking":[0]}`, true},
		{"empty list", `{"thinking":[]}`, false},
		{"object", `{"thinking":{"a":1}}`, true},
		{"empty object", `{"thinking":{}}`, false},
		{"enable_thinking yes", `{"enable_thinking":"yes"}`, true},
		{"enable_thinking 0", `{"enable_thinking":0}`, false},
		{"either truthy", `{"thinking":0,"enable_thinking":"on"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"temperature":0,"chat_template_kwargs":`+tc.kwargs+`}`), &r); err != nil {
				t.Fatal(err)
			}
			if got := r.thinkingMode(); got != tc.thinking {
				t.Fatalf("thinkingMode %v, want %v", got, tc.thinking)
			}
			resp, err := e.Chat(context.Background(), &r)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			gotThinking := c.Message.ReasoningContent != nil && *c.Message.ReasoningContent == "r"
			if gotThinking != tc.thinking || (resp.Usage.CompletionTokensDetails != nil) != tc.thinking {
				t.Errorf("reasoning %v usage %+v, want thinking %v", c.Message.ReasoningContent, resp.Usage, tc.thinking)
			}
		})
	}
}

// TestToolParametersObject: a tool's parameters, when present and not
// null, must be a JSON object (OpenAI's API refuses anything else).
func TestToolParametersObject(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	tool := func(name, params string) string {
		s := `{"type":"function","function":{"name":"` + name + `"`
		if params != "" {
			s += `,"parameters":` + params
		}
		return s + `}}`
	}
	for _, tc := range []struct {
		name, tools, param string
	}{
		{"absent", tool("f", ""), ""},
		{"null", tool("f", "null"), ""},
		{"empty object", tool("f", "{}"), ""},
		{"schema", tool("f", `{"type":"object","properties":{"a":{"type":"string"}}}`), ""},
		{"string", tool("f", `"x"`), "tools[0].function.parameters"},
		{"number", tool("f", `5`), "tools[0].function.parameters"},
		{"array", tool("f", `[{"type":"object"}]`), "tools[0].function.parameters"},
		{"bool", tool("f", `true`), "tools[0].function.parameters"},
		{"second tool", tool("f", "{}") + "," + tool("g", `"x"`), "tools[1].function.parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"q"}],"max_tokens":2,"tools":[`+tc.tools+`]}`), &r); err != nil {
				t.Fatal(err)
			}
			_, err := e.Chat(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err != nil && !strings.Contains(err.Error(), "JSON object") {
				t.Errorf("message %q does not say what is expected", err)
			}
		})
	}
}

// TestCompletionBestOf: best_of is accepted only where it selects nothing
// (absent, 1, or n); any other value is a 400 naming best_of rather than
// being ignored.
func TestCompletionBestOf(t *testing.T) {
	e := newFakeEngine(&fakeBackend{script: scriptText("ok")}, EngineOptions{})
	defer closeEngine(t, e)
	for _, tc := range []struct {
		name, fields, param string
		choices             int
	}{
		{"absent", ``, "", 1},
		{"1", `,"best_of":1`, "", 1},
		{"null", `,"best_of":null`, "", 1},
		{"equal n", `,"n":3,"best_of":3`, "", 3},
		{"1 with n", `,"n":2,"best_of":1`, "", 2},
		{"stream equal n", `,"n":2,"best_of":2,"stream":true`, "", 2},
		{"3", `,"best_of":3`, "best_of", 0},
		{"above n", `,"n":2,"best_of":4`, "best_of", 0},
		{"below n", `,"n":3,"best_of":2`, "best_of", 0},
		{"0", `,"best_of":0`, "best_of", 0},
		{"negative", `,"best_of":-1`, "best_of", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r CompletionRequest
			if err := json.Unmarshal([]byte(`{"prompt":"q","max_tokens":2,"temperature":0`+tc.fields+`}`), &r); err != nil {
				t.Fatal(err)
			}
			s, err := e.CompleteStream(context.Background(), &r)
			wantParam(t, err, tc.param)
			if err != nil {
				return
			}
			finished := 0
			for ch, err := range s {
				if err != nil {
					t.Fatal(err)
				}
				if ch.FinishReason != "" {
					finished++
				}
			}
			if finished != tc.choices {
				t.Errorf("%d choices, want %d", finished, tc.choices)
			}
		})
	}
}

// TestStopTokenIDsText: a stop token id ends the output and is not part of
// its text whether it is special or not (vLLM V1's detokenizer skips a
// stop-terminated step's last token; SGLang trims a matched stop token);
// finish_reason is "stop", matched_stop the id, its logprob is reported,
// and the streamed deltas add up to the same text as the response.
func TestStopTokenIDsText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		stop    []int32
		content string
		matched any
		tokens  int // completion tokens, the stop token included
	}{
		{"plain token", "ab9cd", []int32{'9'}, "ab", int32('9'), 3},
		{"first token", "9cd", []int32{'9'}, "", int32('9'), 1},
		{"special token", "ab<A>cd", []int32{fakeAsst}, "ab", int32(fakeAsst), 3},
		{"first of two ids", "abcd", []int32{'d', 'c'}, "ab", int32('c'), 3},
		{"eos", "ab", []int32{'z'}, "ab", int32(fakeEOS), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(&fakeBackend{script: scriptText(tc.script)}, EngineOptions{})
			defer closeEngine(t, e)
			req := chatReq("q")
			req.StopTokenIDs = tc.stop
			req.Logprobs = true
			resp, err := e.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			if *c.Message.Content != tc.content || c.FinishReason != "stop" || c.MatchedStop != tc.matched {
				t.Errorf("content %q finish %q matched %v; want %q stop %v", *c.Message.Content, c.FinishReason, c.MatchedStop, tc.content, tc.matched)
			}
			if resp.Usage.CompletionTokens != tc.tokens || c.Logprobs == nil || len(c.Logprobs.Content) != tc.tokens {
				t.Errorf("completion tokens %d, logprobs %v; want %d", resp.Usage.CompletionTokens, c.Logprobs, tc.tokens)
			}
			stream, err := e.ChatStream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				text.WriteString(ch.Delta.Content)
			}
			if text.String() != tc.content {
				t.Errorf("streamed %q, want %q", text.String(), tc.content)
			}
		})
	}
}
