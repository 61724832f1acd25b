package dsv4_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/internal/tinymodel"
	"github.com/dsv4go/dsv4go/template"
)

// tinyEngine serves the embedded dsv4-tiny model (real tokenizer, V4
// encoder, parsers).
func tinyEngine(t *testing.T) *dsv4.Engine {
	t.Helper()
	return tinyModelEngine(t, tinyModel(t), dsv4.EngineOptions{})
}

// tinyModel loads the embedded dsv4-tiny model, closed at the test's (or
// benchmark's) end.
func tinyModel(t testing.TB) *dsv4.Model {
	t.Helper()
	return tinymodel.Load(t)
}

// tinyModelEngine starts an engine on m with opts, closed at the test's
// end.
func tinyModelEngine(t *testing.T, m *dsv4.Model, opts dsv4.EngineOptions) *dsv4.Engine {
	t.Helper()
	e, err := dsv4.NewEngine(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

const (
	tinyArithQ   = "What is 17*23? Number only."
	tinySpeedQ   = "A train goes 60 km in 1.5 hours. Average speed? Answer briefly."
	tinySpeedR   = "Average speed is distance divided by time: 60 km / 1.5 h = 40 km/h."
	tinySpeedAns = "The average speed is 40 km/h."
)

// tokenPrefix returns the text of the first k tokens of s (a split at a
// token boundary, so a continued message tokenizes as the trained answer).
func tokenPrefix(t *testing.T, e *dsv4.Engine, s string, k int) string {
	t.Helper()
	ids, err := e.Tokenize(s)
	if err != nil {
		t.Fatal(err)
	}
	if k >= len(ids) {
		t.Fatalf("%q has only %d tokens", s, len(ids))
	}
	p, err := e.Detokenize(ids[:k])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChatEndingPrompt: add_generation_prompt and continue_final_message
// shape the prefilled ids (Engine.ChatPrompt) as the rendered V4 text.
func TestChatEndingPrompt(t *testing.T) {
	e := tinyEngine(t)
	B, E := template.BOS, template.EOS
	user := dsv4.Message{Role: "user", Content: "Hi"}
	asst := dsv4.Message{Role: "assistant", Content: "Hello", ReasoningContent: "greet"}
	think := map[string]any{"thinking": true}
	tests := []struct {
		name     string
		msgs     []dsv4.Message
		agp      *bool
		cont     bool
		kwargs   map[string]any
		want     string
		errParam string
	}{
		{"default", []dsv4.Message{user}, nil, false, nil, B + "<｜User｜>Hi<｜Assistant｜></think>", ""},
		{"default trailing assistant opens a new turn", []dsv4.Message{user, asst}, nil, false, nil,
			B + "<｜User｜>Hi<｜Assistant｜></think>Hello" + E + "<｜Assistant｜></think>", ""},
		{"default trailing assistant thinking", []dsv4.Message{user, asst}, nil, false, think,
			B + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello" + E + "<｜Assistant｜><think>", ""},
		{"agp true", []dsv4.Message{user}, ptr(true), false, nil, B + "<｜User｜>Hi<｜Assistant｜></think>", ""},
		{"agp false", []dsv4.Message{user}, ptr(false), false, think, B + "<｜User｜>Hi", ""},
		{"agp false trailing assistant", []dsv4.Message{user, asst}, ptr(false), false, nil, B + "<｜User｜>Hi<｜Assistant｜></think>Hello" + E, ""},
		{"continue", []dsv4.Message{user, asst}, nil, true, nil, B + "<｜User｜>Hi<｜Assistant｜></think>Hello", ""},
		{"continue agp false", []dsv4.Message{user, asst}, ptr(false), true, nil, B + "<｜User｜>Hi<｜Assistant｜></think>Hello", ""},
		{"continue thinking content", []dsv4.Message{user, asst}, nil, true, think, B + "<｜User｜>Hi<｜Assistant｜><think>greet</think>Hello", ""},
		{"continue thinking reasoning", []dsv4.Message{user, {Role: "assistant", ReasoningContent: "greet"}}, nil, true, think,
			B + "<｜User｜>Hi<｜Assistant｜><think>greet", ""},
		{"continue and agp", []dsv4.Message{user, asst}, ptr(true), true, nil, "", "continue_final_message"},
		{"continue user last", []dsv4.Message{user}, ptr(false), true, nil, "", "continue_final_message"},
		{"continue tool last", []dsv4.Message{user, {Role: "assistant", ToolCalls: []template.ToolCall{{ID: "c", Function: template.FunctionCall{Name: "f", Arguments: "{}"}}}}, {Role: "tool", ToolCallID: "c", Content: "x"}}, nil, true, nil, "", "continue_final_message"},
		{"continue tool calls", []dsv4.Message{user, {Role: "assistant", ToolCalls: []template.ToolCall{{ID: "c", Function: template.FunctionCall{Name: "f", Arguments: "{}"}}}}}, nil, true, nil, "", "continue_final_message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &dsv4.ChatRequest{Messages: tt.msgs, AddGenerationPrompt: tt.agp, ContinueFinalMessage: tt.cont, ChatTemplateKwargs: tt.kwargs}
			got, err := e.ChatPrompt(req)
			if tt.errParam != "" {
				var pe *dsv4.ParamError
				if !errors.As(err, &pe) || pe.Param != tt.errParam || !errors.Is(err, dsv4.ErrInvalidParams) {
					t.Fatalf("err %v, want a ParamError on %s", err, tt.errParam)
				}
				if _, err := e.Chat(context.Background(), req); !errors.As(err, &pe) {
					t.Errorf("Chat: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := e.Tokenize(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				text, _ := e.Detokenize(got)
				t.Errorf("prompt %q\nwant   %q", text, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestChatContinueFinalMessage: the tiny model continues a partial answer
// (chat mode), a partial reasoning (thinking mode: reasoning_content, then
// content) and a partial answer after the reasoning; the reply holds only
// the continuation, in Chat and ChatStream alike.
func TestChatContinueFinalMessage(t *testing.T) {
	e := tinyEngine(t)
	greedy := 0.0
	think := map[string]any{"thinking": true}
	rPre := tokenPrefix(t, e, tinySpeedR, 4)
	aPre := tokenPrefix(t, e, tinySpeedAns, 3)
	tests := []struct {
		name               string
		msgs               []dsv4.Message
		kwargs             map[string]any
		content, reasoning string
	}{
		{"thinking inside reasoning", []dsv4.Message{{Role: "user", Content: tinySpeedQ}, {Role: "assistant", ReasoningContent: rPre}}, think,
			tinySpeedAns, tinySpeedR[len(rPre):]},
		{"thinking after reasoning", []dsv4.Message{{Role: "user", Content: tinySpeedQ}, {Role: "assistant", ReasoningContent: tinySpeedR, Content: aPre}}, think,
			tinySpeedAns[len(aPre):], ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &dsv4.ChatRequest{Messages: tt.msgs, ContinueFinalMessage: true, ChatTemplateKwargs: tt.kwargs,
				RequestSampling: dsv4.RequestSampling{Temperature: &greedy}}
			resp, err := e.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			got, reason := "", ""
			if c.Message.Content != nil {
				got = *c.Message.Content
			}
			if c.Message.ReasoningContent != nil {
				reason = *c.Message.ReasoningContent
			}
			if got != tt.content || reason != tt.reasoning || c.FinishReason != "stop" || c.Message.Role != "assistant" {
				t.Errorf("content %q reasoning %q finish %q; want %q %q stop", got, reason, c.FinishReason, tt.content, tt.reasoning)
			}
			if d := resp.Usage.CompletionTokensDetails; d == nil || (tt.reasoning == "") != (d.ReasoningTokens == 0) {
				t.Errorf("usage %+v", resp.Usage)
			}
			stream, err := e.ChatStream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var sc, sr string
			for ch, err := range stream {
				if err != nil {
					t.Fatal(err)
				}
				sc += ch.Delta.Content
				sr += ch.Delta.ReasoningContent
			}
			if sc != got || sr != reason {
				t.Errorf("stream %q %q, Chat %q %q", sc, sr, got, reason)
			}
		})
	}
}

// TestChatTrailingAssistant: with the default add_generation_prompt a
// trailing assistant message is followed by a new assistant turn, which the
// model fills (the reply is not empty, as it was when the prompt ended at
// the message's end-of-sentence token).
func TestChatTrailingAssistant(t *testing.T) {
	e := tinyEngine(t)
	greedy := 0.0
	req := &dsv4.ChatRequest{Messages: []dsv4.Message{{Role: "user", Content: tinyArithQ}, {Role: "assistant", Content: "391"}},
		RequestSampling: dsv4.RequestSampling{Temperature: &greedy, MaxTokens: ptr(8)}}
	resp, err := e.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Choices[0].Message.Content == nil {
		t.Fatalf("reply %+v", resp)
	}
	// add_generation_prompt false keeps the old prompt (ending at EOS).
	req.AddGenerationPrompt = ptr(false)
	ids, err := e.ChatPrompt(req)
	if err != nil {
		t.Fatal(err)
	}
	if ids[len(ids)-1] != 1 {
		t.Errorf("agp false: prompt does not end with EOS: %v", ids)
	}
}
