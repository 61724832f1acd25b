package dsv4_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// weatherParams is get_weather's parameters schema in the tool-choice
// tests: a required city (bounded, so greedy outputs end) and an optional
// unit enum.
const weatherParams = `{"type":"object","properties":{"city":{"type":"string","maxLength":16},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"]}`

// trainedWeatherParams is get_weather's schema in the tiny model's
// training data.
const trainedWeatherParams = `{"type": "object", "properties": {"location": {"type": "string", "description": "The city name"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}}, "required": ["location"]}`

// toolReq is a chat request with get_weather (parameters params; ""
// leaves them out) and lookup, tool_choice tc and max_tokens 300.
func toolReq(user, params string, tc *dsv4.ToolChoice) *dsv4.ChatRequest {
	r := chatReq(user, "", 300)
	fn := dsv4.FunctionDecl{Name: "get_weather", Description: "Get the weather of a city"}
	if params != "" {
		fn.Parameters = json.RawMessage(params)
	}
	r.Tools = []dsv4.Tool{{Type: "function", Function: fn},
		{Type: "function", Function: dsv4.FunctionDecl{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}}
	r.ToolChoice = tc
	return r
}

// checkNamedCall checks one choice of a constrained tool_choice: exactly
// one call of name with an id, no content, finish as wanted ("length"
// allowed: partial arguments), and, on a stop, arguments that are a
// complete JSON object valid for params (any object when params is "").
func checkNamedCall(t *testing.T, c dsv4.ChatChoice, name, params, finish string) {
	t.Helper()
	m := c.Message
	if m.Content != nil || len(m.ToolCalls) != 1 {
		t.Fatalf("want one tool call and no content, got content %v, calls %+v", m.Content, m.ToolCalls)
	}
	call := m.ToolCalls[0]
	if call.Function.Name != name || call.Type != "function" || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("call %+v, want function %s with an id", call, name)
	}
	g := jsongrammar.JSONObject()
	if params != "" {
		var err error
		if g, err = jsongrammar.Compile([]byte(params)); err != nil {
			t.Fatal(err)
		}
	}
	args := call.Function.Arguments
	st := g.Start()
	if !st.FeedBytes([]byte(args)) {
		t.Fatalf("arguments %q do not follow %s", args, params)
	}
	if c.FinishReason == "length" {
		return
	}
	if c.FinishReason != finish {
		t.Fatalf("finish_reason %q, want %q (arguments %q)", c.FinishReason, finish, args)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil || !st.Accepting() {
		t.Fatalf("arguments %q: not a complete object (%v); reasoning %q", args, err, deref(c.Message.ReasoningContent))
	}
	if params == weatherParams {
		city, ok := v["city"].(string)
		if !ok || utf8.RuneCountInString(city) > 16 { // maxLength counts characters
			t.Fatalf("arguments %q: city missing or too long", args)
		}
		if u, ok := v["unit"]; ok && u != "celsius" && u != "fahrenheit" {
			t.Fatalf("arguments %q: unit %v", args, u)
		}
		for k := range v {
			if k != "city" && k != "unit" {
				t.Fatalf("arguments %q: extra key %q", args, k)
			}
		}
	}
}

// streamed runs r through ChatStream and returns the accumulated response
// and the tool-call deltas of each choice.
func streamed(t *testing.T, e *dsv4.Engine, r *dsv4.ChatRequest) (*dsv4.ChatResponse, map[int][]dsv4.ToolCallDelta) {
	t.Helper()
	r.Stream = true
	defer func() { r.Stream = false }()
	it, err := e.ChatStream(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var acc dsv4.ChatAccumulator
	deltas := map[int][]dsv4.ToolCallDelta{}
	for ch, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Delta.Content != "" {
			t.Fatalf("choice %d: content delta %q under a named tool_choice", ch.Index, ch.Delta.Content)
		}
		deltas[ch.Index] = append(deltas[ch.Index], ch.Delta.ToolCalls...)
		acc.Add(ch)
	}
	return acc.Response(), deltas
}

// withoutIDs returns resp's choices with the random call ids blanked.
func withoutIDs(resp *dsv4.ChatResponse) string {
	cs := make([]dsv4.ChatChoice, len(resp.Choices))
	for i, c := range resp.Choices {
		c.Message.ToolCalls = append([]dsv4.ToolCall(nil), c.Message.ToolCalls...)
		for j := range c.Message.ToolCalls {
			c.Message.ToolCalls[j].ID = ""
		}
		cs[i] = c
	}
	b, _ := json.Marshal(cs)
	return string(b)
}

// TestNamedToolChoice runs tool_choice naming a function on the embedded
// model, as vLLM serves it: the output is constrained to the function's
// parameters schema and returned as exactly one call of it (finish_reason
// "stop"), greedy and sampled (several seeds), n = 2, thinking mode,
// response_format ignored; streamed equals non-streamed, and the stream
// carries the call's id and name in its first fragment only.
func TestNamedToolChoice(t *testing.T) {
	e := tinyEngine(t)
	named := &dsv4.ToolChoice{Mode: "function", Function: "get_weather"}
	type tcase struct {
		name, user, params string
		tc                 *dsv4.ToolChoice
		finish             string
		edit               func(*dsv4.ChatRequest)
		openReasoning      bool // the model ends inside its reasoning (EOS before </think>)
	}
	var cases []tcase
	for _, user := range []string{"What is the weather in Paris?", tinyArithQ} {
		for _, params := range []string{weatherParams, ""} {
			cases = append(cases, tcase{name: fmt.Sprintf("greedy %q params=%t", user[:8], params != ""), user: user, params: params, tc: named, finish: "stop"})
		}
	}
	for seed := int64(1); seed <= 3; seed++ {
		cases = append(cases, tcase{name: fmt.Sprintf("seed %d n=2", seed), user: "Weather in Tokyo and Paris?", params: weatherParams, tc: named, finish: "stop",
			edit: func(r *dsv4.ChatRequest) {
				s, temp, n := seed, 1.0, 2
				r.Seed, r.Temperature, r.N = &s, &temp, &n
			}})
	}
	cases = append(cases,
		// The trained thinking turn with tools (tool_think_weather_paris_tokyo):
		// the tiny model closes its reasoning there.
		tcase{name: "thinking", user: "Compare the weather in Paris and Tokyo.", params: trainedWeatherParams, tc: named, finish: "stop",
			edit: func(r *dsv4.ChatRequest) {
				r.Messages = append([]dsv4.Message{{Role: "system", Content: "You are a helpful assistant."}}, r.Messages...)
				r.Tools[0].Function.Description = "Get the current weather for a city"
				r.Tools[1] = dsv4.Tool{Type: "function", Function: dsv4.FunctionDecl{Name: "get_time", Description: "Get the current local time in a city",
					Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}`)}}
				r.ChatTemplateKwargs = map[string]any{"thinking": true}
				mt := 200
				r.MaxTokens = &mt
			}},
		tcase{name: "thinking never ends", user: "What is the weather in Paris?", params: weatherParams, tc: named, finish: "stop", openReasoning: true,
			edit: func(r *dsv4.ChatRequest) { r.ChatTemplateKwargs = map[string]any{"thinking": true} }},
		tcase{name: "response_format ignored", user: "What is the weather in Paris?", params: weatherParams, tc: named, finish: "stop",
			edit: func(r *dsv4.ChatRequest) {
				r.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}}`)
			}},
		tcase{name: "parallel_tool_calls false", user: "Weather in Tokyo and Paris?", params: weatherParams, tc: named, finish: "stop",
			edit: func(r *dsv4.ChatRequest) { f := false; r.ParallelToolCalls = &f }},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := toolReq(c.user, c.params, c.tc)
			if c.edit != nil {
				c.edit(r)
			}
			resp, err := e.Chat(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if r.N != nil {
				want = *r.N
			}
			if len(resp.Choices) != want {
				t.Fatalf("%d choices, want %d", len(resp.Choices), want)
			}
			t.Logf("%s", withoutIDs(resp))
			for _, ch := range resp.Choices {
				if c.openReasoning {
					// The reasoning never ended: nothing was constrained, and
					// the call has no arguments (vLLM's content is empty too).
					if ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Arguments != "" {
						t.Fatalf("open reasoning: %+v", ch.Message)
					}
					continue
				}
				checkNamedCall(t, ch, "get_weather", c.params, c.finish)
				if r.ChatTemplateKwargs != nil && (ch.Message.ReasoningContent == nil || *ch.Message.ReasoningContent == "") {
					t.Errorf("thinking mode: no reasoning_content")
				}
			}
			sresp, deltas := streamed(t, e, r)
			if a, b := withoutIDs(resp), withoutIDs(sresp); a != b {
				t.Fatalf("streamed differs:\n got %s\nwant %s", b, a)
			}
			for i, ds := range deltas {
				for j, d := range ds {
					first := j == 0
					if d.Index != 0 || (d.ID != "") != first || (d.Function.Name != "") != first || (d.Type == "function") != first {
						t.Fatalf("choice %d fragment %d: %+v", i, j, d)
					}
				}
			}
		})
	}
}

// TestNamedToolChoiceErrors checks that a named function (or a tool of
// "required") whose parameters fall outside the schema subset is a
// ParamError naming the tool's parameters and the keyword, as a
// response_format schema is, while the same tools under tool_choice auto
// or naming another function are accepted (nothing is compiled).
func TestNamedToolChoiceErrors(t *testing.T) {
	e := tinyEngine(t)
	bad := `{"type":"object","properties":{"city":{"type":"string","pattern":"^[A-Z](?=x)"}}}`
	cases := []struct {
		name  string
		tc    *dsv4.ToolChoice
		tools int
		param string
		msg   string
	}{
		{"named", &dsv4.ToolChoice{Mode: "function", Function: "get_weather"}, 2, "tools[0].function.parameters", `"pattern"`},
		{"required one tool", &dsv4.ToolChoice{Mode: "required"}, 1, "tools[0].function.parameters", `"pattern"`},
		{"named other tool", &dsv4.ToolChoice{Mode: "function", Function: "lookup"}, 2, "", ""},
		{"auto", &dsv4.ToolChoice{Mode: "auto"}, 2, "", ""},
		{"required two tools", &dsv4.ToolChoice{Mode: "required"}, 2, "tools[0].function.parameters", `"pattern"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := toolReq("What is the weather in Paris?", bad, c.tc)
			r.Tools = r.Tools[:c.tools]
			mt := 4
			r.MaxTokens = &mt
			_, err := e.Chat(context.Background(), r)
			if c.param == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var pe *dsv4.ParamError
			if !errors.As(err, &pe) || !errors.Is(err, dsv4.ErrInvalidParams) {
				t.Fatalf("got %v, want a ParamError", err)
			}
			if pe.Param != c.param || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("got param %q msg %q, want %q containing %q", pe.Param, pe.Msg, c.param, c.msg)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestRequiredToolChoiceArray runs tool_choice "required" on the embedded
// model, as vLLM serves it whatever the number of tools (one included):
// the output is constrained to a JSON array of {"name", "parameters"}
// objects, one alternative per tool, and every element is returned as a
// tool call in array order (ids, type, the tool's name, its parameters' text as
// arguments), content null, finish_reason "tool_calls" on a stop ("length"
// on a cut); greedy and sampled (n = 2), thinking mode,
// parallel_tool_calls false (the first call only); streamed equals not
// streamed, each call's first fragment carries its id and name. The tiny
// model does not close the array within these budgets (none of 48
// samples of 100 tokens did; they end "length"): a stop string ends one
// case instead, which maps "stop" to "tool_calls" as vLLM does.
func TestRequiredToolChoiceArray(t *testing.T) {
	e := tinyEngine(t)
	required := &dsv4.ToolChoice{Mode: "required"}
	params := map[string]string{"get_weather": weatherParams, "lookup": `{"type":"object","properties":{"q":{"type":"string"}}}`, "ping": ""}
	type tcase struct {
		name, user string
		edit       func(*dsv4.ChatRequest)
	}
	three := func(r *dsv4.ChatRequest) {
		r.Tools = append(r.Tools, dsv4.Tool{Type: "function", Function: dsv4.FunctionDecl{Name: "ping"}})
	}
	cases := []tcase{
		{"greedy", "What is the weather in Paris?", func(r *dsv4.ChatRequest) { mt := 160; r.MaxTokens = &mt }},
		{"greedy one tool", "What is the weather in Paris?", func(r *dsv4.ChatRequest) { r.Tools = r.Tools[:1] }},
		{"sampled one tool n=2", "Weather in Tokyo and Paris?", func(r *dsv4.ChatRequest) {
			r.Tools = r.Tools[:1]
			s, temp, n := int64(2), 1.0, 2
			r.Seed, r.Temperature, r.N = &s, &temp, &n
		}},
		{"greedy three tools", tinyArithQ, three},
		{"stop string", "What is the weather in Paris?", func(r *dsv4.ChatRequest) { r.Stop = []string{`"parameters"`} }},
		{"thinking", "Compare the weather in Paris and Tokyo.", func(r *dsv4.ChatRequest) {
			r.ChatTemplateKwargs = map[string]any{"thinking": true}
			mt := 90
			r.MaxTokens = &mt
		}},
		{"parallel_tool_calls false", "Weather in Tokyo and Paris?", func(r *dsv4.ChatRequest) {
			f := false
			r.ParallelToolCalls = &f
		}},
		{"sampled n=2", "Weather in Tokyo and Paris?", func(r *dsv4.ChatRequest) {
			three(r)
			s, temp, n := int64(1), 1.0, 2
			r.Seed, r.Temperature, r.N = &s, &temp, &n
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := toolReq(c.user, weatherParams, required)
			mt := 60
			r.MaxTokens = &mt
			if c.edit != nil {
				c.edit(r)
			}
			resp, err := e.Chat(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", withoutIDs(resp))
			if r.Stop != nil && resp.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("stop string: finish_reason %q, want tool_calls", resp.Choices[0].FinishReason)
			}
			for _, ch := range resp.Choices {
				m := ch.Message
				if m.Content != nil && *m.Content != "" {
					t.Fatalf("content %q", *m.Content)
				}
				if ch.FinishReason != "length" && (ch.FinishReason != "tool_calls" || len(m.ToolCalls) == 0) {
					t.Fatalf("finish_reason %q with %d calls", ch.FinishReason, len(m.ToolCalls))
				}
				if r.ParallelToolCalls != nil && len(m.ToolCalls) > 1 {
					t.Fatalf("parallel_tool_calls false: %d calls", len(m.ToolCalls))
				}
				if r.ChatTemplateKwargs != nil && (m.ReasoningContent == nil || *m.ReasoningContent == "") {
					t.Errorf("thinking mode: no reasoning_content")
				}
				ids := map[string]bool{}
				for i, call := range m.ToolCalls {
					p, ok := params[call.Function.Name]
					if !ok || call.Type != "function" || !strings.HasPrefix(call.ID, "call_") || ids[call.ID] {
						t.Fatalf("call %d: %+v", i, call)
					}
					ids[call.ID] = true
					last := i == len(m.ToolCalls)-1
					g := jsongrammar.JSONObject()
					if p != "" {
						if g, err = jsongrammar.Compile([]byte(p)); err != nil {
							t.Fatal(err)
						}
					}
					st := g.Start()
					if !st.FeedBytes([]byte(call.Function.Arguments)) || (!st.Accepting() && !(last && (ch.FinishReason == "length" || r.Stop != nil))) {
						t.Fatalf("call %d: arguments %q do not follow %s", i, call.Function.Arguments, p)
					}
				}
			}
			sresp, deltas := streamed(t, e, r)
			if a, b := withoutIDs(resp), withoutIDs(sresp); a != b {
				t.Fatalf("streamed differs:\n got %s\nwant %s", b, a)
			}
			for i, ds := range deltas {
				seen := -1
				for j, d := range ds {
					first := d.Index > seen
					if d.Index > seen+1 || d.Index < seen || (d.ID != "") != first || (d.Function.Name != "") != first || (d.Type == "function") != first {
						t.Fatalf("choice %d fragment %d: %+v", i, j, d)
					}
					seen = d.Index
				}
			}
		})
	}
}
