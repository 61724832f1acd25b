package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/dsv4go/dsv4go/internal/jsongrammar"
)

// TestOpenAIGoStructuredOutputs sends response_format json_schema and
// json_object requests through openai-go (v3) to the server on the
// embedded model, streamed and not, and checks every output against its
// schema (complete and valid JSON with finish_reason stop, a valid prefix
// with length); an unsupported keyword is a 400 naming it.
func TestOpenAIGoStructuredOutputs(t *testing.T) {
	ts := startTinyServer(t)
	c := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	ctx := context.Background()
	// Properties in alphabetical order: openai-go marshals the map sorted,
	// and the order of the schema sent is the order enforced.
	schemaText := `{"type":"object","properties":{"age":{"type":"integer"},"name":{"type":"string","maxLength":10}},"required":["age","name"]}`
	var schema map[string]any
	if err := json.Unmarshal([]byte(schemaText), &schema); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rf   openai.ChatCompletionNewParamsResponseFormatUnion
		g    string // schema text, "" for json_object
	}{
		{"json_schema", openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema}}}, schemaText},
		{"json_object", openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := jsongrammar.JSONObject()
			if tc.g != "" {
				var err error
				if g, err = jsongrammar.Compile([]byte(tc.g)); err != nil {
					t.Fatal(err)
				}
			}
			check := func(content, finish string) {
				t.Helper()
				st := g.Start()
				if !st.FeedBytes([]byte(content)) {
					t.Fatalf("%q (finish %s) does not follow the schema", content, finish)
				}
				if finish == "stop" {
					var v map[string]any
					if !st.Accepting() || json.Unmarshal([]byte(content), &v) != nil {
						t.Fatalf("%q finished with stop but is not a complete value", content)
					}
				} else if finish != "length" {
					t.Fatalf("finish %q", finish)
				}
			}
			params := openai.ChatCompletionNewParams{
				Model:          "dsv4-tiny",
				Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a person as JSON.")},
				ResponseFormat: tc.rf,
				Temperature:    openai.Float(0.7),
				Seed:           openai.Int(5),
				MaxTokens:      openai.Int(48),
				N:              openai.Int(2),
			}
			resp, acc := newAndStreamed(t, c, params, 2)
			for i, ch := range resp.Choices {
				check(ch.Message.Content, string(ch.FinishReason))
				if s := acc.Choices[i].Message.Content; s != ch.Message.Content {
					t.Errorf("choice %d: streamed %q, not streamed %q", i, s, ch.Message.Content)
				}
			}
		})
	}
	t.Run("unsupported keyword", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "dsv4-tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "p", Schema: map[string]any{"type": "string", "pattern": "^a+(?=b)"}}}},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, `"pattern"`) {
			t.Fatalf("got %v, want a 400 naming pattern", err)
		}
	})
}

// TestOpenAIGoNamedToolChoice sends a tool_choice naming get_weather
// through openai-go (v3) to the server on the embedded model, sampled with
// n = 2, streamed and not: every choice is exactly one call of get_weather
// whose arguments follow its parameters schema (a complete JSON object
// with finish_reason "stop", as vLLM answers a named tool_choice; a valid
// prefix with "length"), with null content, and the stream accumulates to
// the same calls; parameters outside the schema subset are a 400 naming
// the keyword.
func TestOpenAIGoNamedToolChoice(t *testing.T) {
	ts := startTinyServer(t)
	c := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	ctx := context.Background()
	// Properties in alphabetical order: openai-go marshals the map sorted.
	schemaText := `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}`
	var schema map[string]any
	if err := json.Unmarshal([]byte(schemaText), &schema); err != nil {
		t.Fatal(err)
	}
	g, err := jsongrammar.Compile([]byte(schemaText))
	if err != nil {
		t.Fatal(err)
	}
	tool := func(params map[string]any) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: params})
	}
	params := openai.ChatCompletionNewParams{
		Model:       "dsv4-tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools:       []openai.ChatCompletionToolUnionParam{tool(schema)},
		ToolChoice:  openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		Temperature: openai.Float(0.8),
		Seed:        openai.Int(11),
		MaxTokens:   openai.Int(200),
		N:           openai.Int(2),
	}
	resp, acc := newAndStreamed(t, c, params, 2)
	for i, ch := range resp.Choices {
		m := ch.Message
		if m.Content != "" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].ID == "" {
			t.Fatalf("choice %d: %+v", i, m)
		}
		args := m.ToolCalls[0].Function.Arguments
		st := g.Start()
		if !st.FeedBytes([]byte(args)) {
			t.Fatalf("choice %d: arguments %q do not follow the schema", i, args)
		}
		switch ch.FinishReason {
		case "stop":
			var v map[string]any
			if !st.Accepting() || json.Unmarshal([]byte(args), &v) != nil {
				t.Fatalf("choice %d: arguments %q are not a complete object", i, args)
			}
		case "length":
		default:
			t.Fatalf("choice %d: finish_reason %q", i, ch.FinishReason)
		}
		sc := acc.Choices[i]
		if len(sc.Message.ToolCalls) != 1 || sc.Message.ToolCalls[0].Function.Arguments != args || sc.FinishReason != ch.FinishReason {
			t.Errorf("choice %d: streamed %+v, not streamed %+v", i, sc, ch)
		}
	}
	t.Run("unsupported keyword", func(t *testing.T) {
		p := params
		p.Tools = []openai.ChatCompletionToolUnionParam{tool(map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "pattern": "[A-Z](?!x)"}}})}
		_, err := c.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, `"pattern"`) {
			t.Fatalf("got %v, want a 400 naming pattern", err)
		}
	})
}

// newAndStreamed sends params through c twice, not streamed and streamed,
// and returns the response and the accumulated stream, both of n choices.
func newAndStreamed(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, n int) (*openai.ChatCompletion, *openai.ChatCompletionAccumulator) {
	t.Helper()
	ctx := context.Background()
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := &openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != n || len(acc.Choices) != n {
		t.Fatalf("%d and %d choices, want %d", len(resp.Choices), len(acc.Choices), n)
	}
	return resp, acc
}

// TestOpenAIGoRequiredToolChoice sends tool_choice "required" with two
// tools through openai-go (v3) to the server on the embedded model,
// streamed and not: the output is vLLM's array of {name, parameters}
// objects, returned as tool calls in array order (each with an id and one
// of the tools' names, arguments a valid prefix of its parameters' JSON),
// with empty content, finish_reason "tool_calls" on a stop (a stop string
// here: the tiny model does not close the array in a short budget) or
// "length"; the stream accumulates to the same calls.
func TestOpenAIGoRequiredToolChoice(t *testing.T) {
	ts := startTinyServer(t)
	c := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	weather := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 12}}, "required": []any{"city"}}
	params := openai.ChatCompletionNewParams{
		Model:    "dsv4-tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: weather}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
		},
		ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(120),
	}
	for _, stop := range []string{"", `"parameters"`} {
		p := params
		if stop != "" {
			p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(stop)}
		}
		resp, acc := newAndStreamed(t, c, p, 1)
		ch, sc := resp.Choices[0], acc.Choices[0]
		m := ch.Message
		if m.Content != "" || len(m.ToolCalls) == 0 {
			t.Fatalf("stop %q: %s", stop, m.RawJSON())
		}
		want := "length"
		if stop != "" {
			want = "tool_calls"
		}
		if ch.FinishReason != want || sc.FinishReason != want {
			t.Fatalf("stop %q: finish_reason %q (streamed %q), want %q", stop, ch.FinishReason, sc.FinishReason, want)
		}
		if len(sc.Message.ToolCalls) != len(m.ToolCalls) {
			t.Fatalf("stop %q: streamed %d calls, not streamed %d", stop, len(sc.Message.ToolCalls), len(m.ToolCalls))
		}
		for i, call := range m.ToolCalls {
			name := call.Function.Name
			if (name != "get_weather" && name != "get_time") || !strings.HasPrefix(call.ID, "call_") {
				t.Fatalf("call %d: %+v", i, call)
			}
			if s := sc.Message.ToolCalls[i]; s.Function.Name != name || s.Function.Arguments != call.Function.Arguments {
				t.Fatalf("call %d: streamed %+v, not streamed %+v", i, s, call)
			}
			if a := call.Function.Arguments; a != "" && !strings.HasPrefix(a, "{") {
				t.Fatalf("call %d: arguments %q", i, a)
			}
		}
	}
}
