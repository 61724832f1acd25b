package dsv4

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"
)

// TestChatStreamCancelEndsWithError: a stream whose ctx ends before every
// choice finished ends with ctx's error, never with the usage chunk as if it
// had completed, and Chat returns that error instead of a truncated response
// with no finish_reason. The cut used to be reported about half the time: a
// choice's send saw ctx done and dropped the error (select picks at random
// between a ready channel and a done ctx), so the merged stream ended
// normally.
func TestChatStreamCancelEndsWithError(t *testing.T) {
	b := &fakeBackend{script: scriptText(strings.Repeat("abc ", 2000))}
	b.decodeDelay = func() { time.Sleep(200 * time.Microsecond) }
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	chat := func(n int) func(context.Context) (iter.Seq2[*ChatChunk, error], error) {
		return func(ctx context.Context) (iter.Seq2[*ChatChunk, error], error) {
			r := chatReq("q")
			r.N = &n
			return e.ChatStream(ctx, r)
		}
	}
	complete := func(ctx context.Context) (iter.Seq2[*ChatChunk, error], error) {
		var r CompletionRequest
		if err := json.Unmarshal([]byte(`{"prompt":["q","r"],"max_tokens":2000,"temperature":0}`), &r); err != nil {
			return nil, err
		}
		return e.CompleteStream(ctx, &r)
	}
	tests := []struct {
		name   string
		stream func(context.Context) (iter.Seq2[*ChatChunk, error], error)
	}{
		{"chat n=1", chat(1)},
		{"chat n=3", chat(3)},
		{"completions 2 prompts", complete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range 20 {
				ctx, cancel := context.WithCancel(context.Background())
				s, err := tc.stream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				k := 0
				var last error
				usage := false
				for ch, err := range s {
					k++
					if k == 3 {
						cancel()
					}
					last = err
					if err == nil && ch.Usage != nil {
						usage = true
					}
				}
				cancel()
				if usage || !errors.Is(last, context.Canceled) {
					t.Fatalf("trial %d: after cancel: usage chunk %v, last error %v; want no usage and context.Canceled", trial, usage, last)
				}
			}
		})
	}
	t.Run("Chat deadline", func(t *testing.T) {
		for trial := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			resp, err := e.Chat(ctx, chatReq("q"))
			cancel()
			if err == nil {
				t.Fatalf("trial %d: no error, finish_reason %q, %d tokens", trial, resp.Choices[0].FinishReason, resp.Usage.CompletionTokens)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("trial %d: %v, want context.DeadlineExceeded", trial, err)
			}
		}
	})
	// A stream that completes is unaffected.
	e2 := newFakeEngine(&fakeBackend{script: scriptText("hi")}, EngineOptions{})
	defer closeEngine(t, e2)
	resp, err := e2.Chat(context.Background(), chatReq("q"))
	if err != nil || resp.Choices[0].FinishReason != "stop" || *resp.Choices[0].Message.Content != "hi" {
		t.Fatalf("complete run: %v, %+v", err, resp)
	}
}
