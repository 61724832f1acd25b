package dsv4

import (
	"context"
	"errors"
	"testing"
)

// EngineOptions.MaxContext caps the backend's context length.
func TestEngineMaxContext(t *testing.T) {
	for _, c := range []struct {
		opt, want int
	}{{0, 50}, {20, 20}, {50, 50}, {100, 50}} {
		e := newFakeEngine(&fakeBackend{ctxLen: 50}, EngineOptions{MaxContext: c.opt})
		if got := e.MaxContext(); got != c.want {
			t.Errorf("MaxContext %d: got %d, want %d", c.opt, got, c.want)
		}
		closeEngine(t, e)
	}
	e := newFakeEngine(&fakeBackend{ctxLen: 50}, EngineOptions{MaxContext: 20})
	defer closeEngine(t, e)
	long := make([]int32, 30)
	if _, err := e.Generate(context.Background(), long[:20], SamplingParams{}); !errors.Is(err, ErrContextLength) {
		t.Errorf("prompt at the cap: %v", err)
	}
	if _, err := e.Generate(context.Background(), long[:10], SamplingParams{MaxTokens: 11}); !errors.Is(err, ErrContextLength) {
		t.Errorf("prompt+max_tokens over the cap: %v", err)
	}
	ids, finish := collect(t, e, context.Background(), long[:15], SamplingParams{IgnoreEOS: true})
	if len(ids) != 5 || finish != "length" {
		t.Errorf("context fill: %d tokens %q", len(ids), finish)
	}
}
