package dsv4

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzChatRequest: any request body decodes, validates and runs (chat and
// completions, on the fake backend) without a panic; every error is typed.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"temperature":0}`,
		`{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"get"}}],"tool_choice":"required","n":2,"logprobs":true,"top_logprobs":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["x","y"],"chat_template_kwargs":{"thinking":true},"top_p":0.5,"top_k":3,"seed":1}`,
		`{"prompt":[1,2,3],"max_tokens":4,"echo":true,"logprobs":2}`,
		`{"prompt":["a","b"],"n":2,"stop":"b"}`,
		`{"messages":[{"role":"tool","content":"r","tool_call_id":"x"}],"logit_bias":{"5":100},"min_tokens":2}`,
	} {
		f.Add([]byte(s))
	}
	e := newFakeEngine(&fakeBackend{script: scriptText("ok @get(1)</think>done")}, EngineOptions{MaxWaiting: 64})
	f.Cleanup(func() { e.Close(context.Background()) })
	clamp := func(rs *RequestSampling) {
		if rs.MaxTokens == nil || *rs.MaxTokens > 8 {
			rs.MaxTokens = ptr(8)
		}
		if rs.N != nil && *rs.N > 3 {
			rs.N = ptr(3)
		}
	}
	typed := func(t *testing.T, err error) {
		if err != nil && !errors.Is(err, ErrInvalidParams) && !errors.Is(err, ErrContextLength) &&
			!errors.Is(err, ErrRequestTooLarge) && !errors.Is(err, ErrQueueFull) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("untyped error: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		defer func() {
			if d := time.Since(t0); d > time.Second {
				t.Fatalf("slow input (%v): %q", d, body)
			}
		}()
		var cr ChatRequest
		if json.Unmarshal(body, &cr) == nil {
			clamp(&cr.RequestSampling)
			_, err := e.Chat(ctx, &cr)
			typed(t, err)
		}
		var pr CompletionRequest
		if json.Unmarshal(body, &pr) == nil {
			clamp(&pr.RequestSampling)
			if len(pr.Prompt.IDs) > 4 {
				pr.Prompt.IDs = pr.Prompt.IDs[:4]
			}
			if len(pr.Prompt.Texts) > 4 {
				pr.Prompt.Texts = pr.Prompt.Texts[:4]
			}
			stream, err := e.CompleteStream(ctx, &pr)
			typed(t, err)
			if err == nil {
				for _, err := range stream {
					typed(t, err)
				}
			}
		}
	})
}
