package dsv4

import (
	"context"
	"errors"
	"testing"
)

// TestIteratorReuse: ranging a finished (or broken-off) Generate / ChatStream
// iterator a second time yields exactly one (zero, ErrIteratorReused): no fake
// chunk, no ErrEngineClosed, no context.Canceled (BREAKER F27).
func TestIteratorReuse(t *testing.T) {
	b := &fakeBackend{script: scriptText("hello there, a short answer")}
	e := newFakeEngine(b, EngineOptions{})
	defer closeEngine(t, e)
	ctx := context.Background()
	for _, breakEarly := range []bool{false, true} {
		gen, err := e.Generate(ctx, []int32{1, 2}, SamplingParams{MaxTokens: 3, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range gen {
			if err != nil {
				t.Fatalf("first range: %v", err)
			}
			n++
			if breakEarly {
				break
			}
		}
		if want := map[bool]int{false: 3, true: 1}[breakEarly]; n != want {
			t.Fatalf("first range: %d tokens, want %d", n, want)
		}
		var got []error
		for tok, err := range gen {
			if tok.ID != 0 || tok.FinishReason != "" {
				t.Errorf("second range yielded token %+v", tok)
			}
			got = append(got, err)
		}
		if len(got) != 1 || !errors.Is(got[0], ErrIteratorReused) {
			t.Errorf("Generate second range (break %v): %v, want [ErrIteratorReused]", breakEarly, got)
		}

		req := chatReq("q")
		req.MaxTokens = ptr(3)
		stream, err := e.ChatStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range stream {
			if err != nil {
				t.Fatalf("chat first range: %v", err)
			}
			if breakEarly {
				break
			}
		}
		got = got[:0]
		for ch, err := range stream {
			if ch != nil {
				t.Errorf("chat second range yielded chunk %+v", ch)
			}
			got = append(got, err)
		}
		if len(got) != 1 || !errors.Is(got[0], ErrIteratorReused) {
			t.Errorf("ChatStream second range (break %v): %v, want [ErrIteratorReused]", breakEarly, got)
		}
	}
}
