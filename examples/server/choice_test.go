package main

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIGoChoiceRegex sends vLLM's structured_outputs choice and regex
// and the legacy guided_choice / guided_regex through openai-go (v3, as
// extra body fields) to the server on the embedded model: chat (n = 2,
// sampled, streamed and not) and completions; every output finished with
// "stop" is one of the choices or a full match of the pattern (a viable
// prefix with "length"), and bad patterns, an empty choice list or two
// kinds at once are 400s naming the field.
func TestOpenAIGoChoiceRegex(t *testing.T) {
	ts := startTinyServer(t)
	c := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	ctx := context.Background()
	choices := []string{"positive", "negative", "neutral"}
	pattern := `[0-9]{2,3}(\.[0-9])? (km|mi)`
	full := regexp.MustCompile(`^(?:` + pattern + `)$`)
	prefixOK := func(s string) bool { // a prefix of some match of pattern
		return regexp.MustCompile(`^[0-9]{0,3}(\.[0-9]?)?( (k|km|m|mi)?)?$`).MatchString(s)
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		check func(out, finish string) bool
	}{
		{"structured_outputs.choice", map[string]any{"structured_outputs": map[string]any{"choice": choices}},
			func(out, finish string) bool { return finish == "stop" && slices.Contains(choices, out) }},
		{"guided_choice", map[string]any{"guided_choice": choices},
			func(out, finish string) bool { return finish == "stop" && slices.Contains(choices, out) }},
		{"structured_outputs.regex", map[string]any{"structured_outputs": map[string]any{"regex": pattern}},
			func(out, finish string) bool {
				return (finish == "stop" && full.MatchString(out)) || (finish == "length" && prefixOK(out))
			}},
		{"guided_regex", map[string]any{"guided_regex": pattern},
			func(out, finish string) bool {
				return (finish == "stop" && full.MatchString(out)) || (finish == "length" && prefixOK(out))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:       "dsv4-tiny",
				Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("How far is it? Is the review positive?")},
				Temperature: openai.Float(0.9),
				Seed:        openai.Int(3),
				MaxTokens:   openai.Int(16),
				N:           openai.Int(2),
			}
			params.SetExtraFields(tc.extra)
			resp, acc := newAndStreamed(t, c, params, 2)
			for i, ch := range resp.Choices {
				if !tc.check(ch.Message.Content, string(ch.FinishReason)) {
					t.Errorf("choice %d: %q (finish %s)", i, ch.Message.Content, ch.FinishReason)
				}
				if s := acc.Choices[i]; s.Message.Content != ch.Message.Content || s.FinishReason != ch.FinishReason {
					t.Errorf("choice %d: streamed %q (%s), not streamed %q (%s)", i, s.Message.Content, s.FinishReason, ch.Message.Content, ch.FinishReason)
				}
			}
			cp := openai.CompletionNewParams{
				Model:       "dsv4-tiny",
				Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("The answer is ")},
				Temperature: openai.Float(0.9),
				Seed:        openai.Int(4),
				MaxTokens:   openai.Int(16),
				N:           openai.Int(2),
			}
			cp.SetExtraFields(tc.extra)
			cresp, err := c.Completions.New(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			for i, ch := range cresp.Choices {
				if !tc.check(ch.Text, string(ch.FinishReason)) {
					t.Errorf("completion %d: %q (finish %s)", i, ch.Text, ch.FinishReason)
				}
			}
		})
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		param string
		msg   string
	}{
		{"backreference", map[string]any{"structured_outputs": map[string]any{"regex": `(a)\1`}}, "structured_outputs.regex", "backreferences are not supported"},
		{"inner anchor", map[string]any{"guided_regex": `a$b`}, "guided_regex", "unsupported $"},
		{"empty choice", map[string]any{"structured_outputs": map[string]any{"choice": []string{}}}, "structured_outputs.choice", "at least one choice"},
		{"two kinds", map[string]any{"structured_outputs": map[string]any{"choice": []string{"a"}, "json_object": true}}, "structured_outputs", "only one kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:    "dsv4-tiny",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}
			params.SetExtraFields(tc.extra)
			_, err := c.Chat.Completions.New(ctx, params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != tc.param || !strings.Contains(apiErr.Message, tc.msg) {
				t.Fatalf("got %v, want a 400 with param %s containing %q", err, tc.param, tc.msg)
			}
		})
	}
}
