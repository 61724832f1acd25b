package dsv4_test

import (
	"context"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
)

// TestToolChoiceThinkingCutByMaxTokens: in thinking mode the tool_choice
// constraint starts after </think>; when max_tokens ends the output inside
// the reasoning, a named tool_choice gives what vLLM's
// chat_completion_full_generator gives: the reasoning parser returns no
// content, and the message is one call of the named function with
// arguments "" (vLLM: arguments=content or ""), the reasoning in
// reasoning_content, finish_reason "length". Required (one tool or
// several: vLLM's array either way) gives no call (vLLM's non-streaming
// path asserts content is not None and fails the request; its streaming
// path emits no call). Streaming gives the same message.
func TestToolChoiceThinkingCutByMaxTokens(t *testing.T) {
	e := tinyEngine(t)
	for _, c := range []struct {
		name  string
		tc    *dsv4.ToolChoice
		one   bool
		calls int
	}{
		{"named", &dsv4.ToolChoice{Mode: "function", Function: "get_weather"}, false, 1},
		{"required one tool", &dsv4.ToolChoice{Mode: "required"}, true, 0},
		{"required two tools", &dsv4.ToolChoice{Mode: "required"}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := toolReq("What is the weather in Paris?", weatherParams, c.tc)
			if c.one {
				r.Tools = r.Tools[:1]
			}
			r.ChatTemplateKwargs = map[string]any{"thinking": true}
			mt := 4 // the tiny model's reasoning here is longer
			r.MaxTokens = &mt
			resp, err := e.Chat(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			m := ch.Message
			if ch.FinishReason != "length" || m.ReasoningContent == nil || *m.ReasoningContent == "" || len(m.ToolCalls) != c.calls {
				t.Fatalf("got %s", withoutIDs(resp))
			}
			if c.calls == 1 {
				call := m.ToolCalls[0]
				if m.Content != nil || call.Function.Name != "get_weather" || call.Function.Arguments != "" || call.ID == "" {
					t.Fatalf("got %s", withoutIDs(resp))
				}
			} else if m.Content != nil && *m.Content != "" {
				t.Fatalf("content %q", *m.Content)
			}
			if s, _ := streamed(t, e, r); withoutIDs(s) != withoutIDs(resp) {
				t.Fatalf("streamed differs:\n got %s\nwant %s", withoutIDs(s), withoutIDs(resp))
			}
		})
	}
}
