package dsv4

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEngineUnread: a request whose consumer does not read pauses once MaxUnread
// tokens wait (no more steps: backpressure) and, after UnreadTimeout paused, ends with
// ErrUnreadTimeout, freeing its batch slot and state; the consumer still gets the
// tokens generated before. A slow but live reader is paused and resumed, never ended.
func TestEngineUnread(t *testing.T) {
	cases := []struct {
		name      string
		opts      EngineOptions
		maxTokens int
		chat      bool          // ChatStream instead of Generate
		readDelay time.Duration // per token; < 0: never read until the engine is idle
		wantToks  int           // tokens the consumer gets
		wantErr   error
	}{
		{"never ranged ends", EngineOptions{MaxUnread: 4, UnreadTimeout: 30 * time.Millisecond}, 1000, false, -1, 4, ErrUnreadTimeout},
		{"never ranged, rest of context", EngineOptions{MaxUnread: 3, UnreadTimeout: 30 * time.Millisecond}, 0, false, -1, 3, ErrUnreadTimeout},
		{"unbounded runs to its end", EngineOptions{MaxUnread: -1}, 40, false, -1, 40, nil},
		{"slow reader resumes", EngineOptions{MaxUnread: 2, UnreadTimeout: 10 * time.Second}, 30, false, 2 * time.Millisecond, 30, nil},
		{"chat never ranged ends", EngineOptions{MaxUnread: 4, UnreadTimeout: 30 * time.Millisecond}, 1000, true, -1, 0, ErrUnreadTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &fakeBackend{script: scriptText("a long answer that goes on and on and on and on and on and on")}
			e := newFakeEngine(b, c.opts)
			defer closeEngine(t, e)
			ctx := context.Background()
			if c.chat {
				req := chatReq("q")
				req.MaxTokens = ptr(c.maxTokens)
				stream, err := e.ChatStream(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, "abandoned chat freed", func() bool {
					s := e.Stats()
					return s.GeneratedTokens > 0 && s.Running == 0 && s.LiveSequences == 0 && b.live.Load() == 0
				})
				var last error
				for _, err := range stream {
					last = err
				}
				if !errors.Is(last, c.wantErr) {
					t.Fatalf("chat ended with %v, want %v", last, c.wantErr)
				}
				return
			}
			seq, err := e.Generate(ctx, []int32{1, 2}, SamplingParams{MaxTokens: c.maxTokens, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			if c.readDelay < 0 {
				waitFor(t, "request ended", func() bool {
					s := e.Stats()
					return s.GeneratedTokens > 0 && s.Running == 0 && s.LiveSequences == 0 && b.live.Load() == 0
				})
				if s := e.Stats(); s.StateBytes != 0 || s.GeneratedTokens != int64(c.wantToks) {
					t.Fatalf("after end: %+v, want %d tokens generated", s, c.wantToks)
				}
			}
			n := 0
			var last error
			for tok, err := range seq {
				if err != nil {
					last = err
					break
				}
				n++
				if n == 1 && c.readDelay > 0 {
					// the reader stalls: the request pauses at MaxUnread unread tokens
					// (besides those the iterator has already taken)
					g := int64(-1)
					waitFor(t, "paused", func() bool {
						time.Sleep(20 * time.Millisecond)
						prev := g
						g = e.Stats().GeneratedTokens
						return g == prev
					})
					if g >= int64(c.wantToks) || e.Stats().LiveSequences != 1 {
						t.Fatalf("stalled reader: request not paused (%d tokens generated)", g)
					}
				}
				if c.readDelay > 0 {
					time.Sleep(c.readDelay)
				}
				_ = tok
			}
			if n != c.wantToks || !errors.Is(last, c.wantErr) || (c.wantErr == nil && last != nil) {
				t.Fatalf("got %d tokens, err %v; want %d, %v", n, last, c.wantToks, c.wantErr)
			}
		})
	}
}
