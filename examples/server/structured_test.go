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
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(resp.Choices) != 2 || len(acc.Choices) != 2 {
				t.Fatalf("%d and %d choices", len(resp.Choices), len(acc.Choices))
			}
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
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "p", Schema: map[string]any{"type": "string", "pattern": "^a+$"}}}},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, `"pattern"`) {
			t.Fatalf("got %v, want a 400 naming pattern", err)
		}
	})
}
