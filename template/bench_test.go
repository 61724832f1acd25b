package template

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchConversation is a 51-message agent conversation: a system prompt
// with 3 tools, 10 rounds of user, assistant tool call, tool result,
// assistant answer, and a final user turn.
func benchConversation() []Message {
	tools := []Tool{}
	for i := range 3 {
		tools = append(tools, Tool{Type: "function", Function: json.RawMessage(fmt.Sprintf(
			`{"name": "tool_%d", "description": "Tool number %d.", "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "query"}, "n": {"type": "integer"}}, "required": ["q"]}}`, i, i))})
	}
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant.", Tools: tools}}
	for i := range 10 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			Message{Role: "user", Content: strings.Repeat("Question about the weather in Paris. ", 5)},
			Message{Role: "assistant", ReasoningContent: "I should call a tool.", ToolCalls: []ToolCall{{ID: id, Type: "function",
				Function: FunctionCall{Name: "tool_1", Arguments: `{"q": "Paris weather", "n": 3, "opts": {"units": "metric", "days": [1, 2, 3]}}`}}}},
			Message{Role: "tool", ToolCallID: id, Content: `{"temperature": 21.5, "sky": "clear"}`},
			Message{Role: "assistant", ReasoningContent: "Answer.", Content: strings.Repeat("It is sunny and 21.5 °C. ", 8)},
		)
	}
	return append(msgs, Message{Role: "user", Content: "Thanks, and tomorrow?"})
}

func BenchmarkEncodeV4(b *testing.B) {
	msgs := benchConversation()
	opts := &Options{Thinking: true}
	out, err := EncodeV4(msgs, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeV4(msgs, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJinjaV3(b *testing.B) {
	j := loadV3Template(b)
	var msgs []map[string]any
	for _, m := range benchConversation() {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": m.ToolCalls})
		default:
			msgs = append(msgs, map[string]any{"role": m.Role, "content": m.Content})
		}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		b.Fatal(err)
	}
	in := &JinjaInput{Messages: raw, AddGenerationPrompt: true, SpecialTokens: map[string]string{"bos_token": BOS}}
	out, err := j.RenderChat(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := j.RenderChat(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
